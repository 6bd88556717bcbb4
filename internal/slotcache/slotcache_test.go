package slotcache

import "testing"

// An entry stored under a hash is loaded back by it; a colliding hash (same slot) replaces
// it, so the table never holds more entries than slots.
func TestTableReplacesOnCollisionAndStaysBounded(t *testing.T) {
	tb := New[int](8)
	one, two := 1, 2
	tb.Store(3, &one)
	if e := tb.Load(3); e == nil || *e != 1 {
		t.Fatalf("Load(3) = %v, want 1", e)
	}
	tb.Store(3+8, &two) // same slot
	if e := tb.Load(3); e == nil || *e != 2 {
		t.Fatalf("after a collision Load(3) = %v, want the newer entry 2", e)
	}
	for h := range uint64(1000) {
		v := int(h)
		tb.Store(h, &v)
	}
	if n := tb.Len(); n != 8 {
		t.Fatalf("table holds %d entries, want its 8 slots", n)
	}
}

func TestNewRefusesASlotCountNotAPowerOfTwo(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New(12) did not panic")
		}
	}()
	New[int](12)
}
