package drill

import (
	"context"
	"fmt"
	"os"

	"github.com/migrate-dev/migrate/internal/svcproc"
	"github.com/migrate-dev/migrate/plans"
)

// startLock starts lock-restart's own lock service, of the plan's kind —
// redis-server, etcd or ZooKeeper — in a fresh folder on a free port; the
// instances use it instead of the plan's. With persist it comes back from
// the restart with its data; without, with none (a Redis without
// persistence; an etcd or ZooKeeper whose data is wiped: a replacement
// that lost every lease and token counter). A lease table in a database
// has no such service: the drill cannot restart the plan's database.
func (d *drill) startLock(ctx context.Context, persist bool) error {
	lk := d.plan.Lock
	dir, err := os.MkdirTemp("", "migrate-drill-lock-")
	if err != nil {
		return err
	}
	var url string
	switch lk.Engine() {
	case plans.Redis:
		bin, ferr := svcproc.FindRedis(d.o.RedisServer)
		if ferr != nil {
			err = fmt.Errorf("drill: %s needs %w, or --redis-server PATH", d.o.Kind, ferr)
			break
		}
		if d.lockSrv, err = svcproc.StartRedis(ctx, bin, dir, persist, setPdeathsig); err == nil {
			url = svcproc.RedisURL(d.lockSrv)
		}
	case plans.Etcd:
		bin, ferr := svcproc.FindEtcd("etcd")
		if ferr != nil {
			err = fmt.Errorf("drill: %s needs %w", d.o.Kind, ferr)
			break
		}
		var m *svcproc.EtcdMember
		if m, err = svcproc.StartEtcd(ctx, bin, dir, nil, setPdeathsig); err == nil {
			d.lockSrv, url = m.Server, m.DSN(lk.Database())
		}
	case plans.ZooKeeper:
		java, ferr := svcproc.FindZooKeeper("java")
		if ferr != nil {
			err = fmt.Errorf("drill: %s needs %w", d.o.Kind, ferr)
			break
		}
		if d.lockSrv, err = svcproc.StartZooKeeper(ctx, java, dir, setPdeathsig); err == nil {
			url = svcproc.ZooKeeperURL(d.lockSrv, lk.Database())
		}
	default:
		err = fmt.Errorf("drill: %s restarts the plan's lock service, and this plan keeps its leases in a database (lock: %s): the drill cannot restart a database; a database outage under a run is tested by migrate's own tests (TestRun_DatabaseCrash)", d.o.Kind, d.plan.LockName())
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return err
	}
	d.wipe = !persist
	dsn, err := plans.ParseDSN(url)
	if err != nil {
		return err
	}
	p := *d.plan
	p.Lock = dsn
	d.plan = &p
	d.log.Info("started a private lock service", "lock", dsn, "persistent", persist)
	return nil
}
