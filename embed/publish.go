package embed

import (
	"github.com/titan-broker/titan/internal/admin"
)

// Message is what a native (in-process) publisher sends. It is published exactly as the
// monitor API's POST /publish does: through the SEND route (header mapping, custom stages,
// durable acceptance for queues and events-store), plus metadata no STOMP client can set.
type Message struct {
	// Destination is written as in a SEND (/queue/jobs, /topic/prices, a bare /orders...).
	Destination string
	// Group is the destination group ("" is "default").
	Group string
	// Headers become message headers as a SEND's would (machinery and reserved names
	// dropped).
	Headers map[string]string
	// Metadata is native-producer metadata (reference 003): "stomp.<std>" for a standard
	// header (content-type, correlation-id, reply-to, expires, priority) sets that header and
	// wins over the same bare name in Headers; everything else reaches STOMP subscribers as
	// one read-only x-titan-metadata header (a JSON object).
	Metadata map[string]string
	// Body is the payload, byte-exact.
	Body []byte
}

// Published describes an accepted message.
type Published struct {
	MessageID   string // the message-id subscribers see
	Destination string // canonical destination
	Dropped     bool   // accepted but not published: a DROP address-full policy or a stage's Drop
}

// ErrRejected is the sentinel (test with errors.Is) of a Publish that a stage of the SEND
// route refused: a custom Stage's Reject, or an authorization stage. The error's text is the
// stage's reason, the same a STOMP client gets in its ERROR frame.
var ErrRejected = admin.ErrRejected

// Publish publishes m through the same SEND route a STOMP SEND takes, custom Stages
// included; only the metadata is native. For queues and events-store it returns once the
// message is committed to the store. Errors: an invalid destination or group, a pattern
// that cannot be published to (commands, queries, temp-queues), a full queue, a store
// failure, a stage's rejection (ErrRejected) (all *admin.Error).
func (h *Broker) Publish(m Message) (*Published, error) {
	body := string(m.Body)
	res, err := h.b.Admin().Publish(admin.PublishRequest{
		Destination: m.Destination, Group: m.Group, Headers: m.Headers, Metadata: m.Metadata, Body: &body,
	})
	if err != nil {
		return nil, err
	}
	return &Published{MessageID: res.MessageID, Destination: res.Destination, Dropped: res.Dropped}, nil
}
