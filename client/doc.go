// Package client is a Go client for the Titan STOMP broker, in the shape of Titan's Java
// client: a Client holds one STOMP 1.2 connection, and every call names the destination
// group first.
//
//	c, err := client.Dial(ctx, "localhost:61613", client.WithLogin("app", "secret"))
//	if err != nil { ... }
//	defer c.Close()
//	// Send waits for the broker's RECEIPT (for queues and events-store: the message is
//	// stored and fsync'd) or for ctx to end.
//	_, err = c.Send(ctx, "default", "/queue/orders", []byte(`{"id":1}`),
//		client.WithContentType("application/json"))
//	sub, err := c.Subscribe("default", "/queue/orders", func(m *client.Message) {
//		process(m.Body)
//		_ = m.Ack()
//	}, client.WithAck(client.AckClientIndividual))
//
// # Groups
//
// A group names a namespace of destinations (Titan DESIGN §3). The empty string and
// "default" both mean the default group; the client sends no group header for them, so it
// also works against brokers that know no groups.
//
// # Delivery, acknowledgement, receipts
//
// Handlers run on one goroutine per subscription, in delivery order. Each subscription
// buffers up to WithBuffer messages (default 1000) between the connection's reader and its
// handler; when the buffer is full the reader waits, so TCP back-pressure reaches the broker
// (which then applies its flow control) instead of the client's memory growing. Ack modes
// are STOMP's (auto, client, client-individual); Message.Ack and Message.Nack answer a
// message on the connection that delivered it.
//
// # Reconnect
//
// With WithReconnect, a lost connection (network error, broker restart, heart-beat timeout,
// an ERROR frame) is re-dialled with exponential backoff up to a bounded number of attempts;
// once connected again every live subscription is re-sent with the same id, so handlers keep
// receiving. Messages that were delivered but not acknowledged are redelivered by the broker
// (queues); a call waiting for a RECEIPT when the connection is lost returns
// ErrConnectionLost, because whether the broker accepted the frame is unknown. Calls made
// while reconnecting wait (bounded by their ctx) for the new connection.
//
// # Concurrency
//
// A Client and a Subscription are safe for concurrent use by multiple goroutines. A Message
// is owned by the handler it was passed to.
//
// Source: STOMP 1.2 (https://stomp.github.io/stomp-specification-1.2.html), sections
// CONNECT, SEND, SUBSCRIBE, ACK/NACK, Heart-beating, RECEIPT and ERROR.
package client
