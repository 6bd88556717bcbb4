package router

import (
	"strings"

	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// machinery reports whether a SEND header is protocol machinery that never becomes message
// metadata (reference 003: destination, receipt, transaction, content-length, message-id,
// subscription, ack, id, timeout), or a header only the broker may set on MESSAGE (group,
// redelivered, delivery-count, sequence: a publisher must not be able to spoof them).
func machinery(key string) bool {
	switch key {
	case frame.HdrDestination, frame.HdrReceipt, frame.HdrTransaction, frame.HdrContentLength,
		frame.HdrMessageID, frame.HdrSubscription, frame.HdrAck, frame.HdrID, frame.HdrTimeout,
		frame.HdrGroup, frame.HdrRedelivered, "delivery-count", "sequence":
		return true
	}
	return false
}

// MetadataHeader is the read-only egress header carrying a native publisher's metadata
// (reference 003's x-kubemq-metadata, renamed).
const MetadataHeader = message.MetadataHeader

// reserved reports whether a client may not set the header at all: names starting with
// "stomp." (reserved metadata), the metadata header (reference 003, "Spoofing guard") and the
// dead-letter headers the broker writes ("dlq-" prefix: dlq-original-destination, dlq-reason,
// dlq-delivery-count; a forged dlq-original-destination would steer an operator's re-drive,
// issue #29). Every way in (STOMP SEND, HTTP publish, embed) maps its headers here.
func reserved(key string) bool {
	return strings.HasPrefix(key, "stomp.") || strings.HasPrefix(key, DeadLetterHeaderPrefix) || key == MetadataHeader
}

// DeadLetterHeaderPrefix starts every header the broker writes on a dead-lettered message;
// clients cannot set such headers.
const DeadLetterHeaderPrefix = "dlq-"

// MapIngress appends to dst the headers of a SEND that become message headers: machinery and
// reserved names removed, first occurrence of each name only (STOMP 1.2, "Repeated Header
// Entries"). The returned headers alias the input strings.
func MapIngress(dst, in []frame.Header) []frame.Header {
outer:
	for _, h := range in {
		if machinery(h.Key) || reserved(h.Key) {
			continue
		}
		for _, k := range dst {
			if k.Key == h.Key {
				continue outer
			}
		}
		dst = append(dst, h)
	}
	return dst
}
