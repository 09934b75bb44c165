// Package miniconf gives a miniredis the CONFIG GET answer of a Redis with
// the default configuration (maxmemory 0, maxmemory-policy noeviction), so
// that the eviction-policy check of holdfast's Redis parts
// (internal/redispolicy) passes on it as on a default Redis. miniredis has
// no CONFIG command of its own, and never evicts a key.
package miniconf

import (
	"path"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

// defaults are the parameters CONFIG GET answers.
var defaults = [][2]string{
	{"maxmemory", "0"},
	{"maxmemory-policy", "noeviction"},
}

// Register adds CONFIG GET to m. It does nothing when m has a CONFIG
// command already (a later miniredis, or a second call).
func Register(m *miniredis.Miniredis) {
	_ = m.Server().Register("CONFIG", func(c *server.Peer, _ string, args []string) {
		if len(args) < 2 || !strings.EqualFold(args[0], "GET") {
			c.WriteError("ERR CONFIG: only CONFIG GET <pattern>... is supported by this miniredis")
			return
		}
		var out [][2]string
		for _, kv := range defaults {
			for _, pattern := range args[1:] {
				if ok, _ := path.Match(strings.ToLower(pattern), kv[0]); ok {
					out = append(out, kv)
					break
				}
			}
		}
		c.WriteMapLen(len(out))
		for _, kv := range out {
			c.WriteBulk(kv[0])
			c.WriteBulk(kv[1])
		}
	})
}
