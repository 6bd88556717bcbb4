package dispatch

import (
	"sort"
	"strings"

	"github.com/titan-broker/titan/internal/dest"
)

// trieRoot keys one channel trie: queues of one group and pattern, bare or prefixed.
type trieRoot struct {
	group   string
	pattern uint8
	bare    bool
}

// trieNode is one channel segment of the dispatcher's trie (reference 000: "a trie over
// channel segments"). The trie serves discovery only (SearchAll); routing uses the exact
// identity map. Guarded by Dispatcher.mu.
type trieNode struct {
	children map[string]*trieNode
	queue    Queue // the queue whose channel ends here, if any
}

func rootOf(id dest.Identity) trieRoot {
	return trieRoot{group: id.Group, pattern: uint8(id.Pattern), bare: id.Bare}
}

// trieInsertLocked records q under its channel. d.mu held for writing.
func (d *Dispatcher) trieInsertLocked(q Queue) {
	id := q.Identity()
	n := d.trie[rootOf(id)]
	if n == nil {
		n = &trieNode{}
		d.trie[rootOf(id)] = n
	}
	for _, seg := range strings.Split(id.Channel, ".") {
		if n.children == nil {
			n.children = map[string]*trieNode{}
		}
		c := n.children[seg]
		if c == nil {
			c = &trieNode{}
			n.children[seg] = c
		}
		n = c
	}
	n.queue = q
}

// trieRemoveLocked forgets q and prunes empty nodes. d.mu held for writing.
func (d *Dispatcher) trieRemoveLocked(q Queue) {
	id := q.Identity()
	root := d.trie[rootOf(id)]
	if root == nil {
		return
	}
	segs := strings.Split(id.Channel, ".")
	path := []*trieNode{root}
	n := root
	for _, seg := range segs {
		n = n.children[seg]
		if n == nil {
			return
		}
		path = append(path, n)
	}
	if n.queue != q {
		return
	}
	n.queue = nil
	for i := len(segs) - 1; i >= 0; i-- {
		child := path[i+1]
		if child.queue != nil || len(child.children) > 0 {
			break
		}
		delete(path[i].children, segs[i])
	}
	if root.queue == nil && len(root.children) == 0 {
		delete(d.trie, rootOf(id))
	}
}

// SearchAll returns the queues of group and pattern whose channel matches filter, in
// destination order: `*` matches one segment, `>` one or more trailing segments, other
// segments themselves (the events wildcard syntax; `/orders/*` finds `/orders/created` but
// not `/orders`). It is discovery for operators (reference 000's Dispatcher.searchAll); the
// publish path never calls it. bare selects bare destinations instead of prefixed ones.
func (d *Dispatcher) SearchAll(group string, pattern uint8, bare bool, filter string) []Queue {
	d.mu.RLock()
	defer d.mu.RUnlock()
	root := d.trie[trieRoot{group: group, pattern: pattern, bare: bare}]
	if root == nil {
		return nil
	}
	var out []Queue
	var walk func(n *trieNode, segs []string)
	collect := func(n *trieNode) {
		var all func(*trieNode)
		all = func(n *trieNode) {
			for _, c := range n.children {
				if c.queue != nil {
					out = append(out, c.queue)
				}
				all(c)
			}
		}
		all(n)
	}
	walk = func(n *trieNode, segs []string) {
		if len(segs) == 0 {
			if n.queue != nil {
				out = append(out, n.queue)
			}
			return
		}
		switch segs[0] {
		case ">":
			if len(segs) == 1 {
				collect(n)
			}
		case "*":
			for _, c := range n.children {
				walk(c, segs[1:])
			}
		default:
			if c := n.children[segs[0]]; c != nil {
				walk(c, segs[1:])
			}
		}
	}
	walk(root, strings.Split(filter, "."))
	sort.Slice(out, func(i, j int) bool { return out[i].Identity().Destination() < out[j].Identity().Destination() })
	return out
}
