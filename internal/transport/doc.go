// Package transport accepts client connections and yields byte streams (net.Conn): plain or
// TLS TCP, and STOMP over WebSocket. It knows nothing of STOMP frames beyond the WebSocket
// subprotocol names; everything above the byte stream is the session's.
package transport
