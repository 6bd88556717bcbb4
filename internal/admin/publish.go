package admin

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"github.com/titan-broker/titan/internal/store"
	"sort"
	"strconv"
	"strings"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// StandardHeaders are the five STOMP headers that map to reserved stomp.* metadata
// (DESIGN §6, reference 003): metadata key "stomp.<name>" sets header <name>.
var StandardHeaders = []string{
	frame.HdrContentType, frame.HdrCorrelationID, frame.HdrReplyTo, frame.HdrExpires, frame.HdrPriority,
}

// PublishRequest is the JSON body of POST /publish.
type PublishRequest struct {
	// Destination is written as in a SEND (any prefix or alias, or bare). Required.
	Destination string `json:"destination"`
	// Group is the destination group ("" means "default").
	Group string `json:"group,omitempty"`
	// Headers become message headers exactly as a SEND's would: protocol machinery
	// (destination, receipt, content-length, group, ...) and reserved names (stomp.*, the
	// broker's dlq-* dead-letter headers, x-titan-metadata) are dropped. Names are applied in
	// sorted order.
	Headers map[string]string `json:"headers,omitempty"`
	// Metadata is native-producer metadata (reference 003): "stomp.<std>" for one of
	// StandardHeaders sets that standard header, winning over the same bare name in Headers;
	// every other entry is carried, as one JSON object, in the read-only x-titan-metadata
	// header.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Body is the payload as text. At most one of Body and BodyBase64 may be set; neither
	// means an empty body.
	Body *string `json:"body,omitempty"`
	// BodyBase64 is the payload in standard base64, for binary bodies.
	BodyBase64 *string `json:"bodyBase64,omitempty"`
}

// PublishResult is the answer of POST /publish.
type PublishResult struct {
	// MessageID is the broker-assigned message-id subscribers see.
	MessageID string `json:"messageId"`
	// Group is the group the message was published in.
	Group string `json:"group"`
	// Destination is the canonical destination ("/queue/jobs" for "/queues/jobs").
	Destination string `json:"destination"`
	// Pattern is "events", "queues" or "events-store".
	Pattern string `json:"pattern"`
	// BodyBytes is the published body's length in bytes.
	BodyBytes int `json:"bodyBytes"`
	// Dropped is true when the queue's DROP policy discarded the message.
	Dropped bool `json:"dropped"`
}

// Publish publishes the message req describes through the router's SEND route for its
// destination — the same route and stages a STOMP SEND runs, custom stages included (header
// mapping, broker-assigned id and timestamp, expires and delay, durable acceptance for
// persistent queues messages and every events-store message, then the pattern). Native
// metadata (req.Metadata) is applied after ingress mapping: only an in-process publisher may
// set it. Events, queues and events-store destinations are accepted. Under a BLOCK policy a
// full queue makes the call wait up to the queue's block timeout.
//
// Errors (*Error): those of identity (commands, queries and temp-queues are
// CodeUnsupportedPattern); CodeNotStored when the store refused the message;
// CodeInvalidParameter for both bodies set, bad base64, a malformed header name or value, or
// an invalid expires or delay header; CodeTooLarge for a body over Options.MaxBodyBytes;
// CodeQueueFull (dispatch.ErrQueueFull, dispatch.ErrQueuePaused); CodeRejected when a stage
// of the route (a custom stage, an authorization stage) refused the message.
func (a *Admin) Publish(req PublishRequest) (*PublishResult, error) { return a.publish(req, "") }

// publish is Publish made as principal ("" for trusted code; see Publication.Principal).
func (a *Admin) publish(req PublishRequest, principal string) (*PublishResult, error) {
	id, err := a.resolve(QueueRef{Destination: req.Destination, Group: req.Group}, true)
	if err != nil {
		return nil, err
	}
	body, err := a.publishBody(req)
	if err != nil {
		return nil, err
	}
	hdrs, native, err := publishHeaders(req.Headers, req.Metadata)
	if err != nil {
		return nil, err
	}
	res, err := a.src.Publish(Publication{Destination: req.Destination, Group: req.Group, Headers: hdrs, Native: native, Body: body, Principal: principal})
	if err != nil {
		return nil, a.publishError(id, err)
	}
	return &PublishResult{
		MessageID: res.MessageID, Group: res.Identity.Group, Destination: res.Destination, Pattern: res.Identity.Pattern.String(),
		BodyBytes: len(body), Dropped: res.Dropped,
	}, nil
}

// publishError maps the error a SEND route ended in to the admin API's codes.
func (a *Admin) publishError(id dest.Identity, err error) *Error {
	var pe *frame.ProtocolError
	switch {
	case errors.Is(err, store.ErrUnavailable):
		return newError(CodeStoreUnavailable, store.Describe(err)+"; the message was not accepted, retry later", err)
	case errors.Is(err, dispatch.ErrDestinationLimit):
		return newError(CodeDestinationLimit, "destination limit reached: publishing to "+describe(id)+" would create a destination over the broker's limit", err)
	case errors.Is(err, dispatch.ErrQueueFull):
		return newError(CodeQueueFull, "queue "+describe(id)+" is full; retry later", err)
	case errors.Is(err, dispatch.ErrQueuePaused):
		return newError(CodeQueueFull, "queue "+describe(id)+" is paused; retry after it is resumed", err)
	case errors.Is(err, dispatch.ErrNotStored):
		a.log.Warn("publish: message not stored", "destination", id.String(), "err", err)
		return newError(CodeNotStored, "message not stored: the broker could not store it, so it was not accepted", err)
	case errors.Is(err, message.ErrInvalidHeader) && errors.As(err, &pe):
		return invalidParam(pe.Error())
	case errors.As(err, &pe) && pe.Err == nil:
		return newError(CodeRejected, pe.Error(), ErrRejected)
	}
	return asError(err)
}

func (a *Admin) publishBody(req PublishRequest) ([]byte, error) {
	var body []byte
	switch {
	case req.Body != nil && req.BodyBase64 != nil:
		return nil, invalidParam("set body or bodyBase64, not both")
	case req.Body != nil:
		body = []byte(*req.Body)
	case req.BodyBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*req.BodyBase64)
		if err != nil {
			return nil, invalidParam("bodyBase64 is not valid standard base64")
		}
		body = b
	}
	if len(body) > a.opts.MaxBodyBytes {
		return nil, newError(CodeTooLarge, "body is "+strconv.Itoa(len(body))+" bytes; the limit is "+strconv.Itoa(a.opts.MaxBodyBytes), ErrTooLarge)
	}
	return body, nil
}

// MetadataHeader is the egress header carrying the remaining publish metadata as JSON.
const MetadataHeader = message.MetadataHeader

// publishHeaders maps a publish request to the SEND's headers (sorted by name, validated)
// and the native headers set after ingress mapping: a "stomp.<std>" metadata entry sets
// standard header <std> (winning over the same bare name), every other entry goes, as one
// JSON object, into the read-only x-titan-metadata header (DESIGN §6, reference 003).
func publishHeaders(headers, metadata map[string]string) (hdrs, native []frame.Header, err error) {
	// The limits a STOMP SEND has (frame.DefaultLimits): no more headers, nor more header
	// bytes, than a client could send over STOMP.
	if len(headers)+len(metadata) > frame.DefaultMaxHeaders {
		return nil, nil, invalidParam("too many headers and metadata entries (at most " + strconv.Itoa(frame.DefaultMaxHeaders) + ")")
	}
	total := 0
	for k, v := range headers {
		total += len(k) + len(v) + 2
	}
	for k, v := range metadata {
		total += len(k) + len(v) + 2
	}
	if total > frame.DefaultMaxHeaderBytes {
		return nil, nil, invalidParam("headers and metadata too large (at most " + strconv.Itoa(frame.DefaultMaxHeaderBytes) + " bytes)")
	}
	hdrs = make([]frame.Header, 0, len(headers))
	for _, k := range sortedKeys(headers) {
		if err := checkHeader(k, headers[k]); err != nil {
			return nil, nil, err
		}
		hdrs = append(hdrs, frame.Header{Key: k, Value: headers[k]})
	}
	rest := map[string]string{}
	for _, k := range sortedKeys(metadata) {
		v := metadata[k]
		if std, ok := strings.CutPrefix(k, "stomp."); ok && isStandard(std) {
			if err := checkHeader(std, v); err != nil {
				return nil, nil, err
			}
			native = append(native, frame.Header{Key: std, Value: v}) // stomp.* wins over a bare name
			continue
		}
		rest[k] = v
	}
	if len(rest) > 0 {
		js, err := json.Marshal(rest) // sorted keys
		if err != nil {
			return nil, nil, invalidParam("metadata cannot be encoded")
		}
		native = append(native, frame.Header{Key: MetadataHeader, Value: string(js)})
	}
	return hdrs, native, nil
}

func isStandard(name string) bool {
	for _, s := range StandardHeaders {
		if s == name {
			return true
		}
	}
	return false
}

func checkHeader(k, v string) error {
	if k == "" || strings.ContainsAny(k, ":\r\n\x00") {
		return invalidParam("invalid header name " + strconv.Quote(k) + ": names are non-empty and hold no ':', CR, LF or NUL")
	}
	if strings.ContainsRune(v, 0) {
		return invalidParam("invalid value for header " + k + ": NUL is not allowed")
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
