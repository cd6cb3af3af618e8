package keyset

import "context"

// Ahead is a read-ahead: a goroutine calls next up to depth steps before
// its consumer asks, so that reading overlaps the consumer's work.
type Ahead[T any] struct {
	ch     chan step[T]
	last   *step[T] // the end or the error, once seen: returned again
	cancel context.CancelFunc
	done   chan struct{}
}

type step[T any] struct {
	v    T
	more bool
	err  error
}

// Prefetch starts reading ahead: next returns a value, whether there is
// more (false ends the read, its value discarded) or an error (which ends it
// too). next is given a context that ends with ctx or at Close. Close the
// Ahead when done with it.
func Prefetch[T any](ctx context.Context, depth int, next func(context.Context) (T, bool, error)) *Ahead[T] {
	ctx, cancel := context.WithCancel(ctx)
	a := &Ahead[T]{ch: make(chan step[T], depth), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for {
			v, more, err := next(ctx)
			select {
			case a.ch <- step[T]{v, more && err == nil, err}:
			case <-ctx.Done():
				return
			}
			if err != nil || !more {
				return
			}
		}
	}()
	return a
}

// Next returns the next value; ok is false at the end (and after an error,
// which it returns). It returns ctx's error if ctx ends first.
func (a *Ahead[T]) Next(ctx context.Context) (v T, ok bool, err error) {
	if a.last != nil {
		return v, false, a.last.err
	}
	select {
	case s := <-a.ch:
		if !s.more {
			a.last = &s
			return v, false, s.err
		}
		return s.v, true, nil
	case <-ctx.Done():
		return v, false, ctx.Err()
	}
}

// Close stops the read-ahead (ending next's context) and waits for its
// goroutine.
func (a *Ahead[T]) Close() {
	a.cancel()
	<-a.done
}
