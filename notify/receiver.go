package notify

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Received is one event a Receiver accepted.
type Received struct {
	ID, Type string
	Body     []byte
}

// Receiver is a webhook receiver of run events, as a user would write
// one: it checks each request's signature (Verify) and accepts the event
// with the answer Answer gives (204 when nil). The drill and the tests use
// it; a receiver written in Go can start from it.
type Receiver struct {
	Key []byte // the HMAC key of the sink's secret (Key)
	// Answer, when not nil, is the status (and headers) of the n-th
	// request with a valid signature, from 1: a 2xx accepts the event.
	Answer func(n int) (int, http.Header)
	// Want are headers every request must carry, as given.
	Want http.Header

	mu       sync.Mutex
	requests int
	accepted []Received
	rejected []string
}

// ServeHTTP checks and records one request.
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err == nil && r.Method != http.MethodPost {
		err = fmt.Errorf("method %s", r.Method)
	}
	for k := range rc.Want {
		if err == nil && r.Header.Get(k) != rc.Want.Get(k) {
			err = fmt.Errorf("header %s missing or other than wanted", k)
		}
	}
	id := ""
	if err == nil {
		id, err = Verify(rc.Key, r.Header, body, 5*time.Minute)
	}
	var ev struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	}
	if err == nil {
		if err = json.Unmarshal(body, &ev); err == nil && ev.ID != id {
			err = fmt.Errorf("body id %q, header id %q", ev.ID, id)
		}
	}
	if err != nil {
		rc.rejected = append(rc.rejected, err.Error())
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.requests++
	status := http.StatusNoContent
	if rc.Answer != nil {
		var h http.Header
		status, h = rc.Answer(rc.requests)
		for k, v := range h {
			w.Header()[k] = v
		}
	}
	if status/100 == 2 {
		rc.accepted = append(rc.accepted, Received{ID: id, Type: ev.Type, Body: body})
	}
	w.WriteHeader(status)
}

// Accepted is what the receiver accepted, in order.
func (rc *Receiver) Accepted() []Received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.accepted)
}

// Rejected are the requests refused for a bad signature, method or body.
func (rc *Receiver) Rejected() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.rejected)
}

// Tally compares what a receiver accepted with the events recorded (the
// outbox's ids, in order).
type Tally struct {
	Produced    int `json:"produced"`    // events recorded
	Delivered   int `json:"delivered"`   // distinct recorded events accepted
	Redelivered int `json:"redelivered"` // accepted again (the same id)
	Lost        int `json:"lost"`        // recorded, never accepted
	// Duplicates are events left twice after de-duplication by id: an id
	// accepted with other bytes than the first time, or an accepted id
	// that was never recorded. 0 for a receiver that de-duplicates to see
	// each event once.
	Duplicates int `json:"duplicates_after_dedup"`
	// OutOfOrder counts accepted events whose first receipt came before
	// that of an event recorded earlier.
	OutOfOrder int `json:"out_of_order"`
}

// Count tallies got against the recorded ids.
func Count(recorded []string, got []Received) Tally {
	t := Tally{Produced: len(recorded)}
	pos := map[string]int{}
	for i, id := range recorded {
		pos[id] = i
	}
	first := map[string][]byte{}
	last := -1
	for _, g := range got {
		body, seen := first[g.ID]
		switch _, known := pos[g.ID]; {
		case !known:
			t.Duplicates++
		case seen:
			t.Redelivered++
			if string(body) != string(g.Body) {
				t.Duplicates++
			}
		default:
			first[g.ID] = g.Body
			t.Delivered++
			if pos[g.ID] < last {
				t.OutOfOrder++
			}
			last = max(last, pos[g.ID])
		}
	}
	t.Lost = t.Produced - t.Delivered
	return t
}
