package plans

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// The lock service of a plan: lock: (a URL or db), redis: as its
// shorthand, neither (the target database), and the flags that override
// them.
func TestParse_Lock(t *testing.T) {
	const top = "name: m\nsource: ${SOURCE_URL}\ntarget: ${TARGET_URL}\ntables: [{name: t, key: [id]}]\n"
	for _, tc := range []struct {
		name, doc string
		o         Overrides
		engine    Engine
		inTarget  bool
		lockName  string
		hosts     []string
		prefix    string
	}{
		{name: "neither: the target database", engine: "", inTarget: true, lockName: "db"},
		{name: "lock: db", doc: "lock: db\n", inTarget: true, lockName: "db"},
		{name: "redis shorthand", doc: "redis: ${REDIS_URL}\n", engine: Redis, lockName: "redis://:xxxxx@cache:6379/0"},
		{name: "lock: redis", doc: "lock: redis://cache:6379/1\n", engine: Redis, lockName: "redis://cache:6379/1"},
		{name: "etcd cluster", doc: "lock: etcd://u:s3cret@e1:2379,e2,[::1]:2381/migrate/prod\nlease_ttl: 5s\n", engine: Etcd,
			lockName: "etcd://u:xxxxx@e1:2379,e2,[::1]:2381/migrate/prod", hosts: []string{"e1:2379", "e2:2379", "[::1]:2381"}, prefix: "migrate/prod"},
		{name: "etcd over TLS", doc: "lock: etcds://e1/m?tls_ca_file=/ca.pem\n", engine: Etcd, hosts: []string{"e1:2379"}, prefix: "m"},
		{name: "zookeeper", doc: "lock: zk://z1:2181,z2:2182/migrate\n", engine: ZooKeeper, hosts: []string{"z1:2181", "z2:2182"}, prefix: "migrate"},
		{name: "another database", doc: "lock: mysql://u:pw@locks:3306/leases\n", engine: MySQL, lockName: "mysql://u:xxxxx@locks:3306/leases"},
		{name: "--lock db over redis:", doc: "redis: ${REDIS_URL}\n", o: Overrides{Lock: "db"}, inTarget: true},
		{name: "--lock over redis:", doc: "redis: ${REDIS_URL}\n", o: Overrides{Lock: "zk://z/p"}, engine: ZooKeeper},
		{name: "--redis over lock:", doc: "lock: etcd://e/p\n", o: Overrides{Redis: "redis://r:1/0"}, engine: Redis},
		{name: "--redis over lock: db", doc: "lock: db\n", o: Overrides{Redis: "redis://r:1/0"}, engine: Redis},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseWith("plan.yaml", []byte(top+tc.doc), testLookup, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if p.Lock.Engine() != tc.engine || p.LockInTarget() != tc.inTarget {
				t.Errorf("lock %q (%s), in the target %v; want %q, %v", p.Lock.Engine(), p.LockName(), p.LockInTarget(), tc.engine, tc.inTarget)
			}
			if tc.lockName != "" && p.LockName() != tc.lockName {
				t.Errorf("lock name %q, want %q", p.LockName(), tc.lockName)
			}
			if strings.Contains(p.LockName(), "s3cret") {
				t.Errorf("lock name %q shows the password", p.LockName())
			}
			if tc.hosts != nil && (!reflect.DeepEqual(p.Lock.Hosts(), tc.hosts) || p.Lock.Database() != tc.prefix) {
				t.Errorf("hosts %v prefix %q, want %v %q", p.Lock.Hosts(), p.Lock.Database(), tc.hosts, tc.prefix)
			}
			// Narrowing a plan (Apply) keeps its lock service.
			before := p.LockName()
			if err := p.Apply(Overrides{BatchSize: 10}); err != nil || p.LockName() != before {
				t.Errorf("after Apply: %s, %v; want %s", p.LockName(), err, before)
			}
		})
	}
	for _, tc := range []struct {
		name, doc string
		o         Overrides
		want      string
	}{
		{"both keys", "redis: ${REDIS_URL}\nlock: db\n", Overrides{}, "plan.yaml:5:8: give lock: or redis:, not both (redis: URL is lock: URL); lock: is at line 6, column 7"},
		{"both flags", "", Overrides{Lock: "db", Redis: "redis://r/0"}, "flags: give --lock or --redis, not both (--redis URL is --lock URL)"},
		{"empty lock", "lock: ''\n", Overrides{}, "plan.yaml:5:7: lock is empty"},
		{"redis: not redis", "redis: etcd://e/p\n", Overrides{}, "plan.yaml:5:8: redis must be a redis:// DSN, not etcd"},
		{"lock: not a lock service", "lock: http://x/\n", Overrides{}, `plan.yaml:5:7: lock: invalid DSN: unsupported scheme "http"`},
		{"etcd leases are whole seconds", "lock: etcd://e/p\nlease_ttl: 2500ms\n", Overrides{}, "plan.yaml:6:12: lease_ttl 2.5s: etcd grants leases in whole seconds (lock: etcd://…); use e.g. 3s"},
		{"bad etcd port", "lock: etcd://e:99999/p\n", Overrides{}, "plan.yaml:5:7: lock: invalid DSN: etcd DSN port must be a number 1..65535"},
		{"empty etcd host", "lock: etcd://e1,,e2/p\n", Overrides{}, "plan.yaml:5:7: lock: invalid DSN: etcd DSN has an empty or invalid host in its list (host:port,host:port)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseWith("plan.yaml", []byte(top+tc.doc), testLookup, tc.o)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	// A file's path is not a secret: tls_key_file names where the key is.
	if d, err := ParseDSN("etcds://e1/m?tls_cert_file=/c.pem&tls_key_file=/k.pem"); err != nil || d.Password() != "" || !strings.Contains(d.String(), "/k.pem") {
		t.Errorf("etcds with a client certificate: password %q, printed %s, %v", d.Password(), d, err)
	}
	if p, err := FromFlags(Overrides{Source: "postgres://h/db", Target: "mysql://h/db", Table: "t", Key: "id", LeaseTTL: time.Second}); err != nil || !p.LockInTarget() {
		t.Errorf("the plan-less form with no lock flag: %v, %v; want the leases in the target", p, err)
	}
}
