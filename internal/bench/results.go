package bench

import (
	"cmp"
	"slices"
	"strings"
)

// Sample is one measurement: its run, wall seconds and the peak RSS of the
// measured process (0: not measured); the change stream's also the CPU
// seconds its consumer used, in the client and in the server (0: not
// measured).
type Sample struct {
	Run                  int
	Seconds              float64
	RSSKB                int64
	ClientCPU, ServerCPU float64
}

// Failure is a measurement that could not be made, and why.
type Failure struct {
	Key, Reason string
}

// FleetSample is one run of one fleet cell: S shards, N instances.
type FleetSample struct {
	Shards, Instances, Run int
	Wall, Copy             float64        // seconds to the last exit, to the last shard done
	Rows                   []string       // rows_written of each instance ("?": unknown)
	Commands               []CommandCount // Redis commands during the cell, most called first
}

// Ops is the number of Redis commands of the sample.
func (f FleetSample) Ops() int64 {
	var n int64
	for _, c := range f.Commands {
		n += c.Calls
	}
	return n
}

// CommandCount is how often Redis ran one command.
type CommandCount struct {
	Name  string
	Calls int64
}

// Results holds every measurement of a bench, by key ("pg-pg.run",
// "my.load", …), and the measurements that failed.
type Results struct {
	samples  map[string][]Sample
	failures []Failure
	fleet    []FleetSample
}

// NewResults returns an empty set of results.
func NewResults() *Results { return &Results{samples: map[string][]Sample{}} }

// Record adds one measurement of key.
func (r *Results) Record(key string, s Sample) { r.samples[key] = append(r.samples[key], s) }

// Fail records that key could not be measured.
func (r *Results) Fail(key, reason string) { r.failures = append(r.failures, Failure{key, reason}) }

// RecordFleet adds one run of a fleet cell.
func (r *Results) RecordFleet(f FleetSample) { r.fleet = append(r.fleet, f) }

// Failed reports whether a measurement of key failed.
func (r *Results) Failed(key string) bool {
	return slices.ContainsFunc(r.failures, func(f Failure) bool { return f.Key == key })
}

// Reason is why key failed first; "" when it did not.
func (r *Results) Reason(key string) string {
	for _, f := range r.failures {
		if f.Key == key {
			return f.Reason
		}
	}
	return ""
}

// Samples are key's measurements, in the order they were made.
func (r *Results) Samples(key string) []Sample { return r.samples[key] }

// Median is the median seconds of key over the runs; none when none was made.
func (r *Results) Median(key string) Figure {
	var vs []float64
	for _, s := range r.samples[key] {
		vs = append(vs, s.Seconds)
	}
	return Median(vs)
}

// MedianCPU is the median client and server CPU seconds of key over the
// runs; none when none was measured.
func (r *Results) MedianCPU(key string) (client, server Figure) {
	var c, s []float64
	for _, x := range r.samples[key] {
		if x.ClientCPU > 0 || x.ServerCPU > 0 {
			c, s = append(c, x.ClientCPU), append(s, x.ServerCPU)
		}
	}
	return Median(c), Median(s)
}

// MaxRSSMB is the highest peak RSS of the measurements of keys, in MB
// (1024 KiB); none when there is none.
func (r *Results) MaxRSSMB(keys ...string) Figure {
	var best Figure
	for _, k := range keys {
		for _, s := range r.samples[k] {
			if mb := float64(s.RSSKB) / 1024; !best.Valid || mb > best.V {
				best = Some(mb)
			}
		}
	}
	return best
}

// Failures are the failed measurements, sorted, each once.
func (r *Results) Failures() []Failure {
	fs := slices.Clone(r.failures)
	slices.SortFunc(fs, func(a, b Failure) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.Reason, b.Reason))
	})
	return slices.Compact(fs)
}

// Broken reports whether a measurement failed that makes the bench fail:
// any but pgloader's (an outside tool that does not always cope).
func (r *Results) Broken() bool {
	return slices.ContainsFunc(r.failures, func(f Failure) bool { return !strings.HasSuffix(f.Key, ".pgloader") })
}

// Fleet are the runs of the fleet cell of s shards and n instances.
func (r *Results) Fleet(s, n int) []FleetSample {
	var out []FleetSample
	for _, f := range r.fleet {
		if f.Shards == s && f.Instances == n {
			out = append(out, f)
		}
	}
	return out
}
