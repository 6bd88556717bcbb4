// Package outbox delivers stored messages: a Poller reads a store stream after a cursor and
// hands records to a bounded outbound Sink, and a Regulator adapts the poll interval to how the
// sink copes (reference 004, "How the vessels self-tune under load").
//
// A shed (the sink refusing a message because its outbound buffer is full) is a delivery
// decision, never a durability one: the record stays in the store and the poller finds it
// again. The regulator watches sheds: each one doubles the interval (up to Max), and each
// clean delivery while a shed is outstanding halves it back toward Base (hysteresis: it eases
// back as many notches as it grew). The poller also skips a fetch entirely while the sink still
// holds work (skip-while-busy), so in-flight data stays bounded whatever the cadence.
package outbox
