package session

// ReasonOperatorClose is the message header of the ERROR frame sent to a connection an
// operator closes (`titan connection close`, DELETE /titan/monitor/connections).
const ReasonOperatorClose = "connection closed by an operator"

// operatorCloseDetail is the body of that ERROR frame.
const operatorCloseDetail = "an operator closed this connection (titan connection close); its unacknowledged messages go back to their queues"

// CloseByOperator tells the client why it is being closed (ERROR "connection closed by an
// operator", as STOMP requires an ERROR before the server closes; RabbitMQ's management
// close does the same) and closes the connection with CloseAdmin once the frame is written
// (bounded by WriteTimeout, as every close after a flush). Idempotent; safe for concurrent
// use.
func (s *Session) CloseByOperator() {
	if s.isClosing() {
		return
	}
	s.writeError(ReasonOperatorClose, "", operatorCloseDetail)
	s.CloseAfterFlush(CloseAdmin)
}
