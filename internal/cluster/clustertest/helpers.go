package clustertest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// SettingsFunc adapts a function to cluster.Settings.
type SettingsFunc func(dest.Identity) address.Settings

// Settings implements cluster.Settings.
func (f SettingsFunc) Settings(id dest.Identity) address.Settings { return f(id) }

// TestSettings: queues "ring.*" have ring size 3; logs "ret.*" keep 2 messages per log
// and five minutes; everything else has the defaults.
var TestSettings = SettingsFunc(func(id dest.Identity) address.Settings {
	s := address.Defaults(id)
	if len(id.Channel) > 5 && id.Channel[:5] == "ring." {
		s.RingSize = 3
	}
	if len(id.Channel) > 4 && id.Channel[:4] == "ret." {
		s.RetentionMaxMessages, s.RetentionMaxAge = 2, 5*time.Minute
	}
	return s
})

// QueueID is the identity of queue ch of group.
func QueueID(group, ch string) dest.Identity {
	return dest.Identity{Group: group, Pattern: dest.PatternQueues, Channel: ch}
}

// MsgFor is a persistent message with body (and hdrs) sent to id.
func MsgFor(id dest.Identity, body string, hdrs ...frame.Header) *message.Message {
	return &message.Message{ID: message.NewID("unit"), Group: id.Group, Destination: id.Destination(), Body: []byte(body), Persistent: true, Headers: hdrs}
}

// BodiesOn returns the bodies stored on subject in stream, oldest first.
func BodiesOn(t testing.TB, js jetstream.JetStream, stream, subject string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		raw, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if raw.Subject != subject {
			continue
		}
		m, err := message.Decode(raw.Data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(m.Body))
	}
	return out
}

// Equal reports whether a and b hold the same strings in the same order.
func Equal(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// CountingWriter stands in for a client socket (a delivery.Writer): it takes every
// MESSAGE and counts them in N. Safe for concurrent use.
type CountingWriter struct{ N atomic.Int64 }

// Version implements delivery.Writer: STOMP 1.2.
func (w *CountingWriter) Version() frame.Version { return frame.V12 }

// WriteMessage implements delivery.Writer: counted, always taken.
func (w *CountingWriter) WriteMessage(*frame.Buf, []byte) bool { w.N.Add(1); return true }

// WriteEvent implements delivery.Writer: counted, always taken.
func (w *CountingWriter) WriteEvent(*frame.Buf, []byte, bool) (bool, <-chan struct{}) {
	w.N.Add(1)
	return true, nil
}

// QueuedBytes implements delivery.Writer: nothing is ever queued.
func (w *CountingWriter) QueuedBytes() int64 { return 0 }
