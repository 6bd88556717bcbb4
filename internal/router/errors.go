package router

import "errors"

// ErrNoQueue is the error (frame.ProtocolError.Err) of a SEND or SUBSCRIBE that names a
// queue with a spelling addressing an existing queue only (RabbitMQ's /amq/queue/<name>)
// when that queue does not exist; the client's ERROR is "no queue '<name>'" (RabbitMQ:
// "NOT_FOUND - no queue").
var ErrNoQueue = errors.New("router: no queue")
