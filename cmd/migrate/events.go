package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/migrate-dev/migrate/lock"
	"github.com/migrate-dev/migrate/notify"
	"github.com/migrate-dev/migrate/outbox"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/runner"
	"github.com/migrate-dev/migrate/status"
)

const eventsUsage = `usage: migrate events -p PLAN [--json] [--pending] [--sink NAME]
       migrate events redeliver -p PLAN (--id ID[,ID...] | --type GLOB | --pending) [--sink NAME]
       migrate events deliver -p PLAN [--timeout D]
       migrate events enable -p PLAN --sink NAME

Lists the plan's run events (the outbox in the target) and their delivery to
each sink of the plan's notify: section; redelivers chosen events now (with
their ids: receivers de-duplicate by them); delivers what is pending and exits;
re-enables a sink that a 410 answer disabled.
Example: migrate events -p orders.yaml --pending`

// eventsCmd is `migrate events`.
func eventsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	var pf planFlags
	pf.register(fs)
	asJSON := fs.Bool("json", false, "print the events as one JSON object on stdout")
	pending := fs.Bool("pending", false, "only events some sink has not had (redeliver: send those)")
	sink := fs.String("sink", "", "only this sink")
	ids := fs.String("id", "", "redeliver: the events with these ids, comma-separated")
	typ := fs.String("type", "", "redeliver: the events whose type matches this glob, e.g. 'shard.*'")
	timeout := fs.Duration("timeout", time.Minute, "deliver: how long to wait for the receivers")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), eventsUsage)
		fs.PrintDefaults()
	}
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	if pf.path == "" {
		return usageError{"events needs -p PLAN"}
	}
	plan, err := pf.load()
	if err != nil {
		return err
	}
	if *sink != "" && !slices.ContainsFunc(plan.Notify, func(s plans.Sink) bool { return s.Name == *sink }) {
		return usageError{fmt.Sprintf("the plan has no sink %q in notify:", *sink)}
	}
	owner := lock.NewOwnerID("events")
	opts := runner.Options{Log: pf.logger(stderr), Owner: owner, Deliver: sub == "deliver"}
	r, svc, err := open(ctx, plan, opts, true)
	if err != nil {
		return err
	}
	defer r.Close()
	ev := eventsRun{plan: plan, svc: svc, sink: *sink, stdout: stdout}
	switch sub {
	case "":
		return ev.list(ctx, *pending, *asJSON)
	case "redeliver":
		if given := btoi(*ids != "") + btoi(*typ != "") + btoi(*pending); given != 1 {
			return usageError{"events redeliver needs one of --id, --type or --pending"}
		}
		return ev.redeliver(ctx, *ids, *typ, *pending)
	case "deliver":
		return ev.deliver(ctx, *timeout)
	case "enable":
		if *sink == "" {
			return usageError{"events enable needs --sink NAME"}
		}
		if err := svc.Outbox.SetSink(ctx, svc.Target, plan.Name, *sink, outbox.SinkRecord{}); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "sink %s enabled: the next `migrate run` or `migrate events deliver` sends it what is pending\n", *sink)
		return nil
	}
	return usageError{fmt.Sprintf("unknown events command %q (want redeliver, deliver or enable)", sub)}
}

// eventsRun is one `migrate events` command.
type eventsRun struct {
	plan   *plans.Plan
	svc    runner.Services
	sink   string
	stdout io.Writer
}

// eventJSON is an event as `migrate events --json` prints it.
type eventJSON struct {
	status.EventStatus
	Data json.RawMessage `json:"data"`
}

// list prints the outbox, oldest first.
func (e eventsRun) list(ctx context.Context, pending, asJSON bool) error {
	raw, evs, sinks, err := status.Events(ctx, e.svc.Outbox, e.svc.Target, e.plan)
	if err != nil {
		return err
	}
	out := []eventJSON{}
	for i, ev := range evs {
		if e.sink != "" {
			ev.DeliveredTo = slices.DeleteFunc(ev.DeliveredTo, func(s string) bool { return s != e.sink })
			ev.PendingFor = slices.DeleteFunc(ev.PendingFor, func(s string) bool { return s != e.sink })
		}
		if pending && len(ev.PendingFor) == 0 {
			continue
		}
		out = append(out, eventJSON{ev, raw[i].Data})
	}
	if asJSON {
		return writeJSON(e.stdout, struct {
			Plan   string              `json:"plan"`
			Events []eventJSON         `json:"events"`
			Notify []status.SinkStatus `json:"notify"`
		}{e.plan.Name, out, sinks})
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tAT\tTYPE\tSUBJECT\tID\tDELIVERED TO\tPENDING FOR")
	for _, ev := range out {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", ev.Seq, ev.At.UTC().Format(time.RFC3339), ev.Type, ev.Subject, ev.ID,
			orDash(strings.Join(ev.DeliveredTo, ",")), orDash(strings.Join(ev.PendingFor, ",")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	status.RenderNotify(e.stdout, sinks)
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// redeliver sends the chosen events now to each chosen sink that wants
// them, whatever their delivery says, as GitHub's redelivery does, and
// marks each delivered that was. It does not take the delivery lease:
// the running deliverer may send one of them too (with the same id).
func (e eventsRun) redeliver(ctx context.Context, ids, glob string, pending bool) error {
	raw, evs, _, err := status.Events(ctx, e.svc.Outbox, e.svc.Target, e.plan)
	if err != nil {
		return err
	}
	want, unseen := map[string]bool{}, map[string]bool{}
	for id := range strings.SplitSeq(ids, ",") {
		if id = strings.TrimSpace(id); id != "" {
			want[id], unseen[id] = true, true
		}
	}
	var failed, sent int
	for _, s := range e.plan.Notify {
		if e.sink != "" && s.Name != e.sink {
			continue
		}
		sink, err := notify.New(s, os.LookupEnv)
		if err != nil {
			return err
		}
		for i, ev := range evs {
			match, _ := path.Match(glob, ev.Type)
			switch {
			case !s.Wants(ev.Type),
				len(want) > 0 && !want[ev.ID],
				glob != "" && !match,
				pending && !slices.Contains(ev.PendingFor, s.Name):
				continue
			}
			delete(unseen, ev.ID)
			res := sink.Send(ctx, notify.Event{ID: ev.ID, Type: ev.Type, At: raw[i].At, Body: raw[i].Payload()})
			if res.Err != nil {
				failed++
				fmt.Fprintf(e.stdout, "%s %s -> %s: failed: %v\n", ev.ID, ev.Type, s.Name, res.Err)
				continue
			}
			sent++
			if err := e.svc.Outbox.Mark(ctx, e.svc.Target, e.plan.Name, s.Name, ev.ID, outbox.Delivered, 1); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s %s -> %s: delivered\n", ev.ID, ev.Type, s.Name)
		}
	}
	for id := range unseen {
		fmt.Fprintf(e.stdout, "%s: no such event for the chosen sinks\n", id)
		failed++
	}
	fmt.Fprintf(e.stdout, "%d delivered, %d failed\n", sent, failed)
	if failed > 0 {
		return fmt.Errorf("%d redeliveries failed", failed)
	}
	return nil
}

// deliver runs the plan's deliverer until nothing is pending or timeout.
func (e eventsRun) deliver(ctx context.Context, timeout time.Duration) error {
	d := e.svc.Notify
	if d == nil {
		return usageError{"the plan has no notify: sinks to deliver to"}
	}
	dctx, cancel := context.WithCancel(ctx)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		d.Run(dctx)
	}()
	n := d.Drain(ctx, timeout)
	cancel()
	<-ended
	if n > 0 {
		return fmt.Errorf("%d run events still pending after %v; see `migrate events --pending`", n, timeout)
	}
	fmt.Fprintln(e.stdout, "every run event is delivered (or delivered by the instance that holds the delivery lease)")
	return nil
}
