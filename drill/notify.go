package drill

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/migrate-dev/migrate/internal/faultpoint"
	"github.com/migrate-dev/migrate/internal/netfault"
	"github.com/migrate-dev/migrate/notify"
	"github.com/migrate-dev/migrate/outbox"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/status"
)

// The notify drill: the holder is SIGKILLed mid-copy (as in the kill
// drill); the standby that takes its shards and the delivery of the run
// events over stops itself right after a webhook accepted its first
// shard.done and before it marked it delivered (the fault point
// notify.after_send), and is SIGKILLed there; a fresh instance finishes
// the plan. The instances send their events to a receiver in the drill,
// never to the plan's own sinks, which must then hold every event the
// outbox recorded, the one sent before the kill twice.

const (
	// hookSecretEnv carries the drill's webhook secret to the instances:
	// never on their command line, never printed.
	hookSecretEnv = "MIGRATE_DRILL_WEBHOOK_SECRET"
	// hookSink names the one sink of the instances' plan.
	hookSink = "drill"
	// afterSend is where the standby stops: its first shard.done accepted
	// by the receiver, not marked delivered yet.
	afterSend = "notify.after_send:shard.done"
	freshName = "drill-c"
)

// hook is the notify drill's receiver of run events and the plan file the
// instances run, which sends them there.
type hook struct {
	rc     *notify.Receiver
	srv    *http.Server
	url    string
	secret string
	dir    string // holds file
	file   string
	proxy  *netfault.Proxy // the standby's way to the target
}

// notifyUp starts the drill's receiver and writes the instances' plan: the
// plan file with its notify: replaced by one webhook to the receiver. It
// returns the holder's and the standby's environments, given env (the
// instances') and holderEnv (through the holder's proxies).
func (d *drill) notifyUp(env, holderEnv []string) (holder, standby []string, err error) {
	if err := d.receive(); err != nil {
		return nil, nil, err
	}
	if standby, err = d.hook.standbyProxy(d.plan, env); err != nil {
		return nil, nil, err
	}
	return d.hook.env(holderEnv, ""), d.hook.env(standby, afterSend), nil
}

// receive starts the receiver, with a random secret, and writes the
// instances' plan.
func (d *drill) receive() error {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw) // crypto/rand: never fails
	h := &hook{secret: "whsec_" + base64.StdEncoding.EncodeToString(raw)}
	key, err := notify.Key(h.secret)
	if err != nil {
		return fmt.Errorf("drill: the webhook secret: %w", err)
	}
	h.rc = &notify.Receiver{Key: key}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("drill: the receiver of run events: %w", err)
	}
	h.url = "http://" + ln.Addr().String() + "/migrate-drill"
	h.srv = &http.Server{Handler: h.rc, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = h.srv.Serve(ln) }()
	d.hook = h // closed with the drill from here on

	src, err := os.ReadFile(d.o.Plan.File)
	if err != nil {
		return fmt.Errorf("drill: read the plan: %w", err)
	}
	derived, err := hookPlan(src, h.url)
	if err != nil {
		return fmt.Errorf("drill: %s: %w", d.o.Plan.File, err)
	}
	if h.dir, err = os.MkdirTemp("", "migrate-drill-"); err != nil {
		return fmt.Errorf("drill: %w", err)
	}
	// The same base name: a plan's errors and its resume commands name
	// the file.
	h.file = filepath.Join(h.dir, filepath.Base(d.o.Plan.File))
	if err := os.WriteFile(h.file, derived, 0o600); err != nil {
		return fmt.Errorf("drill: write the instances' plan: %w", err)
	}
	d.log.Info("receiving the run events", "url", h.url, "plan", h.file)
	return nil
}

func (h *hook) close() {
	if h.srv != nil {
		_ = h.srv.Close()
	}
	if h.proxy != nil {
		h.proxy.Close()
	}
	if h.dir != "" {
		_ = os.RemoveAll(h.dir)
	}
}

// standbyProxy starts the standby's own proxy to the target and returns
// env with the target through it. The drill slows it as the holder's once
// the standby waits, before the holder is killed: an instance that ends
// while another holds the delivery lease leaves the pending events to that
// one (notify.Deliverer.Drain), here the killed holder, whose delivery
// lease may lapse up to a renewal period (TTL/3) after its shards'. Slowed,
// the standby is still copying when it takes the delivery over; slowed
// from its start, it would take so long to start that the holder copied
// most of the table meanwhile.
func (h *hook) standbyProxy(plan *plans.Plan, env []string) ([]string, error) {
	addr, err := hostPort(plan.Target)
	if err != nil {
		return nil, err
	}
	if h.proxy, err = netfault.NewProxy("standby-target", addr); err != nil {
		return nil, err
	}
	via, err := redirect(plan.Target, h.proxy.Addr())
	if err != nil {
		return nil, err
	}
	out := slices.Clone(env)
	for i, kv := range out {
		if strings.HasPrefix(kv, "MIGRATE_TARGET=") {
			out[i] = "MIGRATE_TARGET=" + via.Secret()
		}
	}
	return out, nil
}

// slow slows the standby's way to the target (nil: not the notify drill).
func (h *hook) slow(latency time.Duration) error {
	if h == nil {
		return nil
	}
	return h.proxy.Slow(latency)
}

// args are the instances' plan arguments with their plan file.
func (h *hook) args(planArgs []string) []string {
	out := slices.Clone(planArgs)
	for i := 0; i+1 < len(out); i++ {
		if out[i] == "-p" {
			out[i+1] = h.file
		}
	}
	return out
}

// env adds the webhook secret to an instance's environment, and the fault
// point it stops at ("" for none: one in the drill's own environment is
// not handed down).
func (h *hook) env(env []string, point string) []string {
	return append(slices.Clone(env), hookSecretEnv+"="+h.secret, faultpoint.Env+"="+point)
}

// hookSinkYAML is the sink of the instances' plan, as the plan file writes
// it.
type hookSinkYAML struct {
	Name    string `yaml:"name"`
	Webhook struct {
		URL       string `yaml:"url"`
		SecretEnv string `yaml:"secret_env"`
	} `yaml:"webhook"`
}

// hookPlan returns the plan file src with its notify: section replaced by
// (or, without one, given) one webhook sink named drill that posts to url,
// signed with the secret in hookSecretEnv. The rest of the document is
// kept as written, ${VAR}s included: the instances expand them as the
// plan's own runs would.
func hookPlan(src []byte, url string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("not a plan: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("not a plan: want a mapping of keys")
	}
	sink := hookSinkYAML{Name: hookSink}
	sink.Webhook.URL, sink.Webhook.SecretEnv = url, hookSecretEnv
	var sinks yaml.Node
	if err := sinks.Encode([]hookSinkYAML{sink}); err != nil {
		return nil, err
	}
	root := doc.Content[0]
	replaced := false
	for i := 0; i+1 < len(root.Content); i += 2 {
		if k := root.Content[i]; k.Kind == yaml.ScalarNode && k.Value == "notify" {
			root.Content[i+1], replaced = &sinks, true
		}
	}
	if !replaced {
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "notify"}, &sinks)
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// killSuccessor is the notify drill's second fault: it waits for the
// standby to stop itself at afterSend, SIGKILLs it, and starts the fresh
// instance drill-c once the standby's delivery lease has lapsed.
//
// Started after the lapse, drill-c takes the delivery over at once and
// sends again what the standby sent and did not mark; started earlier, it
// could finish the copy first and spend its end's wait (notify.Deliverer.
// Drain, bounded) on the dead standby's lease.
func (d *drill) killSuccessor(ctx context.Context, env []string) error {
	b := d.standbys[0]
	if err := waitStopped(ctx, b, afterSend); err != nil {
		return err
	}
	d.log.Info("the standby stopped after the receiver accepted its first shard.done, before marking it delivered; killing it", "instance", b.name)
	if err := b.signal(syscall.SIGKILL); err != nil {
		return err
	}
	b.wait(ctx, 10*time.Second)
	ttl := d.plan.LeaseTTL
	unit := outbox.Unit(d.plan.Name)
	err := d.w.waitFor(ctx, 3*ttl+30*time.Second, "the killed standby's delivery lease to lapse", func(st *status.Status) bool {
		return !slices.ContainsFunc(st.Leases, func(l status.LeaseStatus) bool {
			return l.Table == unit.Table && l.Shard == unit.Index && label(l.Owner) == b.name
		})
	})
	if err != nil {
		return err
	}
	c, err := startChild(ctx, d.o.Binary, freshName, "fresh", d.childArgs(), d.hook.env(env, ""), d.o.ChildLog)
	if err != nil {
		return fmt.Errorf("drill: start %s: %w", freshName, err)
	}
	d.standbys = append(d.standbys, c)
	d.log.Info("started a fresh instance to finish the plan", "instance", c.name)
	return nil
}

// waitStopped waits until c has written that it reached the fault point
// and stopped itself (SIGSTOP). It fails when c exits first.
func waitStopped(ctx context.Context, c *child, point string) error {
	for {
		if c.exited() {
			err := fmt.Errorf("drill: waiting for %s to stop at %s: %w", c.name, point, errAborted{c})
			if c.exitCode() == 0 {
				err = fmt.Errorf("%w: it finished the plan before it took the delivery of the run events over from the killed holder "+
					"(an instance that ends while another holds the delivery lease leaves the events to that one); "+
					"use a larger table or a larger --holder-latency", err)
			}
			return err
		}
		if c.stderr.count("faultpoint "+point+" reached") > 0 && stopped(c.cmd.Process.Pid) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// holdsDelivery reports whether the holder holds the plan's delivery
// lease: the notify drill kills it once it delivers, so that the standby
// takes the delivery over with the shards.
func (d *drill) holdsDelivery(st *status.Status) bool {
	unit := outbox.Unit(d.plan.Name)
	return slices.ContainsFunc(st.Leases, func(l status.LeaseStatus) bool {
		return l.Table == unit.Table && l.Shard == unit.Index && strings.HasPrefix(l.Owner, holderName+"-")
	})
}
