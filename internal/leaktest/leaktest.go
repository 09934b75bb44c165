// Package leaktest records text that leaves a process through a driver's
// hooks or logs (redistest.Statements, pgtest.Args), for tests that a
// secret, such as a lease owner, never shows in it.
package leaktest

import (
	"strings"
	"sync"
)

// Text is recorded text, safe for concurrent use. The zero value is empty
// and ready.
type Text struct {
	mu sync.Mutex
	b  strings.Builder
	n  int
}

// Add appends line (and a newline), and counts one entry when entry is
// true (a command sent, a statement logged).
func (t *Text) Add(entry bool, line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if entry {
		t.n++
	}
	t.b.WriteString(line)
	t.b.WriteByte('\n')
}

// String returns everything recorded.
func (t *Text) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}

// Count returns how many entries were recorded.
func (t *Text) Count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// Showing returns the first recorded line that holds one of secrets, ""
// when none does (an empty secret is skipped).
func (t *Text) Showing(secrets ...string) string {
	for line := range strings.Lines(t.String()) {
		for _, secret := range secrets {
			if secret != "" && strings.Contains(line, secret) {
				return line
			}
		}
	}
	return ""
}
