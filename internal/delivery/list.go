package delivery

// RemoveFromList removes v from the list m[k] without reusing the list's array (readers
// may hold it), deleting the key when the list empties; it reports whether it did. The
// pattern packages keep their subscriptions and readers in such lists. The caller holds
// the lock guarding m.
func RemoveFromList[K comparable, V comparable](m map[K][]V, k K, v V) (emptied bool) {
	l := m[k]
	for i, x := range l {
		if x == v {
			l = append(l[:i:i], l[i+1:]...)
			break
		}
	}
	if len(l) == 0 {
		delete(m, k)
		return true
	}
	m[k] = l
	return false
}
