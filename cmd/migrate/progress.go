package main

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// bar is a progress bar on stderr: rows done of the estimated total, rows/s
// and ETA.
type bar struct {
	w  io.Writer
	mu sync.Mutex
	b  *progressbar.ProgressBar
}

func newBar(w io.Writer) *bar { return &bar{w: w} }

func (b *bar) Start(what string, total, done int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b = progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(b.w),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("rows"),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionSetWidth(30),
		progressbar.OptionOnCompletion(func() { _, _ = io.WriteString(b.w, "\n") }),
	)
	_ = b.b.Set64(done)
}

func (b *bar) Add(rows int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b == nil {
		return
	}
	if cur := b.b.State().CurrentNum + rows; cur > b.b.GetMax64() {
		b.b.ChangeMax64(cur) // the total was an estimate
	}
	_ = b.b.Add64(rows)
}

// Describe replaces the text before the bar.
func (b *bar) Describe(what string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b != nil {
		b.b.Describe(what)
	}
}

// Write writes a log line above the bar: the bar is cleared first and drawn
// again by the next Add.
func (b *bar) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b != nil && !b.b.IsFinished() {
		_ = b.b.Clear()
	}
	return b.w.Write(p)
}

func (b *bar) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b != nil && !b.b.IsFinished() {
		_ = b.b.Finish()
	}
}
