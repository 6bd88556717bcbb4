// Package sublist is Titan's subscription index: a generic, concurrency-safe trie from channel
// filters to subscribers that finds every subscriber of a concrete channel without scanning
// the subscriptions, for fan-out to many subscribers (DESIGN §2, "Wildcards").
//
// Filters and channels are the dot-separated channels of package dest: a channel
// ("orders.eu.created") is what dest.Parse returns, a filter is what dest.ParseFilter returns
// and may hold the wildcard tokens "*" (exactly one token, any position) and ">" (one or more
// trailing tokens, last position only). Sublist.Match agrees with dest.Match for every
// filter/channel pair; a property test holds it to that.
//
// The index knows nothing of groups or patterns. The caller keeps one Sublist per (group,
// pattern), or folds them into the filter's first tokens, so that identity stays exact.
//
// # Structure
//
// Each trie level maps a literal token to a node and has at most one "*" node and one ">"
// node; a node holds the subscribers whose filter ends there and the next level. Matching a
// channel of k tokens visits, at each level, the literal child, the "*" child and the ">"
// child, so its cost depends on k and on how many wildcard branches exist, not on the number
// of subscriptions. Remove prunes nodes and levels that become empty. The idea of the
// literal/"*"/">" levels and of a generation-checked result cache comes from nats-server's
// server/sublist.go.
//
// # Cache
//
// Match results are cached per concrete channel in a bounded map (about 1024 entries). Every
// Insert or Remove that changes the index increments a generation counter; a cached result
// from an older generation is ignored and replaced. When the map is full, the next miss sweeps
// it down to half, stale entries first. A cache hit takes the read lock and does not
// allocate. No goroutine is started.
//
// # Concurrency
//
// All methods are safe for concurrent use; one sync.RWMutex guards the trie, the count, the
// generation and the cache. Match calls its callback after releasing the lock, over an
// immutable snapshot, so callbacks may re-enter the Sublist.
package sublist
