package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/migrate-dev/migrate/status"
)

// statusCmd is `migrate status`: the durable state of a plan, once, in a
// loop (--watch), or as a web page (--serve).
func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	var pf planFlags
	pf.register(fs)
	asJSON := fs.Bool("json", false, "print the status as one JSON object on stdout (with --watch: one object per line per interval)")
	serve := fs.String("serve", "", "serve the status as a web page at http://ADDR/ (and its JSON at /status.json) until interrupted, e.g. 127.0.0.1:8080")
	watch := fs.Bool("watch", false, "show the status again every --interval until interrupted (redrawn in place on a terminal)")
	interval := fs.Duration("interval", 2*time.Second, "with --watch: how often to read the status")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: migrate status -p PLAN [--json] [--watch [--interval D]] [--serve ADDR]\n\n"+
			"Shows per table the shards done, rows, rate and ETA; per shard its checkpoint, rate, ETA and fence watermark; and live leases.\n"+
			"Reads the plan's durable state in the target and the lock service: no running copy is needed.\n"+
			"Examples: migrate status -p orders.yaml --json\n          migrate status -p orders.yaml --watch\n          migrate status -p orders.yaml --serve 127.0.0.1:8080")
		fs.PrintDefaults()
	}
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case *serve != "" && (*watch || *asJSON):
		return usageError{"--serve serves the page and its JSON (/status.json): it takes neither --watch nor --json"}
	case set["interval"] && !*watch:
		return usageError{"--interval goes with --watch"}
	case *interval <= 0:
		return usageError{"--interval must be positive"}
	}
	plan, err := pf.load()
	if err != nil {
		return err
	}
	rd, closeStatus, err := openStatus(ctx, plan, pf.logger(stderr))
	if err != nil {
		return err
	}
	defer closeStatus()
	switch {
	case *serve != "":
		rd.Target.SetMaxOpenConns(statusPool)
		bound, done, err := listenHTTP(ctx, *serve, &status.Page{Read: rd.Read, Plan: plan.Name})
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "serving the status of plan %s at http://%s/\n", plan.Name, bound)
		<-done // ctx ended (SIGINT, SIGTERM) and the server shut down
		return nil
	case *watch:
		return watchStatus(ctx, rd.Read, stdout, stderr, *interval, *asJSON, isTerminal(os.Stdout))
	}
	st, err := rd.Read(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return status.WriteJSON(stdout, st)
	}
	return status.Render(stdout, st)
}

// Terminal control (ANSI): clear the screen, the cursor to the top left,
// clear to the end of the line, clear to the end of the screen.
const (
	ansiClear     = "\x1b[2J"
	ansiHome      = "\x1b[H"
	ansiClearLine = "\x1b[K"
	ansiClearDown = "\x1b[J"
)

// watchStatus reads the state every interval until ctx ends and shows it:
// on a terminal redrawn in place, otherwise one block after the other
// separated by a blank line; asJSON, one JSON object per line. A read that
// fails is shown (on stderr when not on a terminal or asJSON) and tried
// again at the next interval: a database away for a moment does not end
// the watch.
func watchStatus(ctx context.Context, read func(context.Context) (*status.Status, error), stdout, stderr io.Writer,
	interval time.Duration, asJSON, tty bool) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for n := 0; ; n++ {
		rctx, cancel := context.WithTimeout(ctx, max(interval, status.PageTimeout))
		st, err := read(rctx)
		cancel()
		if ctx.Err() != nil {
			return nil // interrupted: the watch's normal end
		}
		at := time.Now().UTC().Format(time.RFC3339)
		var b bytes.Buffer
		switch {
		case err != nil && (asJSON || !tty):
			fmt.Fprintf(stderr, "migrate status: %s: %v\n", at, err)
		case err != nil:
			fmt.Fprintf(&b, "%s: the status could not be read (trying again every %s):\n%v\n", at, interval, err)
		case asJSON:
			if err := json.NewEncoder(&b).Encode(st); err != nil { // one line, not WriteJSON's indented object
				return err
			}
		default:
			if n > 0 && !tty {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "%s, every %s (Ctrl-C to stop)\n", at, interval)
			if err := status.Render(&b, st); err != nil {
				return err
			}
		}
		out := b.String()
		if tty && !asJSON {
			// Each line overwrites the last frame's and clears the rest of
			// it, and what the last frame had below is cleared: no flicker.
			out = ansiHome + strings.ReplaceAll(out, "\n", ansiClearLine+"\n") + ansiClearDown
			if n == 0 {
				out = ansiClear + out
			}
		}
		if _, err := io.WriteString(stdout, out); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
