package durables

// errNotStored wraps a JetStream failure of a change: the client's ERROR reads
// "durable subscription not stored" (router.Refusal).
type errNotStored struct{ err error }

func (e errNotStored) Error() string {
	return "cluster: durable subscription not stored: " + e.err.Error()
}
func (e errNotStored) Unwrap() error { return e.err }

// Refusal implements router.Refusal: the ERROR's message header.
func (errNotStored) Refusal() string { return "durable subscription not stored" }

func notStored(err error) error { return errNotStored{err} }
