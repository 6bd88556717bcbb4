package durable

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/dest"
)

// Operator queue settings and paused flags, kept in the store's metadata.

// settingsKey is the meta key holding the settings of operator-created queues (a JSON object
// by stream name).
const settingsKey = "queue-settings"

// SaveQueueSettings records (s non-nil) or forgets (s nil) the settings of an
// operator-created queue, durably, so a restart recreates the queue with them (a ring keeps its
// ring size). It implements dispatch.SettingsStore.
func (l *Log) SaveQueueSettings(id dest.Identity, s *address.Settings) {
	l.settingsMu.Lock()
	defer l.settingsMu.Unlock()
	all, err := l.queueSettingsLocked()
	if err != nil {
		l.log.Error("reading queue settings", "err", err)
		return
	}
	if s == nil {
		delete(all, l.stream(id))
		l.savePausedLocked(id, false) // a deleted queue comes back running
	} else {
		all[l.stream(id)] = *s
	}
	data, _ := json.Marshal(all)
	if err := l.st.SetMeta(settingsKey, data); err != nil {
		l.log.Error("saving queue settings", "err", err)
	}
}

func (l *Log) queueSettingsLocked() (map[string]address.Settings, error) {
	all := map[string]address.Settings{}
	v, ok, err := l.st.Meta(settingsKey)
	if err != nil || !ok {
		return all, err
	}
	if err := json.Unmarshal(v, &all); err != nil {
		return map[string]address.Settings{}, fmt.Errorf("durable: queue settings: %w", err)
	}
	return all, nil
}

// pausedKey is the meta key holding the stream names of paused queues (a JSON array).
const pausedKey = "queue-paused"

// SaveQueuePaused records, durably, that the queue id is paused (or no longer is), so a
// restart brings it back paused: operator-made state survives restarts like the queue's
// settings. It implements dispatch.PauseStore. Failures are logged, not returned (the queue's
// state in memory has already changed).
func (l *Log) SaveQueuePaused(id dest.Identity, paused bool) {
	l.settingsMu.Lock()
	defer l.settingsMu.Unlock()
	l.savePausedLocked(id, paused)
}

func (l *Log) savePausedLocked(id dest.Identity, paused bool) {
	set, err := l.pausedLocked()
	if err != nil {
		l.log.Error("reading paused queues", "err", err)
		return
	}
	name := l.stream(id)
	if set[name] == paused {
		return
	}
	if paused {
		set[name] = true
	} else {
		delete(set, name)
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	data, _ := json.Marshal(names)
	if err := l.st.SetMeta(pausedKey, data); err != nil {
		l.log.Error("saving paused queues", "err", err)
	}
}

func (l *Log) pausedLocked() (map[string]bool, error) {
	set := map[string]bool{}
	v, ok, err := l.st.Meta(pausedKey)
	if err != nil || !ok {
		return set, err
	}
	var names []string
	if err := json.Unmarshal(v, &names); err != nil {
		return set, fmt.Errorf("durable: paused queues: %w", err)
	}
	for _, n := range names {
		set[n] = true
	}
	return set, nil
}

// PausedQueues returns the identities of the queues saved as paused (SaveQueuePaused), in
// stream-name order.
func (l *Log) PausedQueues() ([]dest.Identity, error) {
	l.settingsMu.Lock()
	defer l.settingsMu.Unlock()
	set, err := l.pausedLocked()
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]dest.Identity, 0, len(names))
	for _, n := range names {
		if id, ok := ParseStream(n); ok {
			out = append(out, id)
		}
	}
	return out, err
}

// QueueSettings returns the saved settings of operator-created queues by identity.
func (l *Log) QueueSettings() (map[dest.Identity]address.Settings, error) {
	l.settingsMu.Lock()
	defer l.settingsMu.Unlock()
	all, err := l.queueSettingsLocked()
	out := make(map[dest.Identity]address.Settings, len(all))
	for name, s := range all {
		if id, ok := ParseStream(name); ok {
			out[id] = s
		}
	}
	return out, err
}
