package quorum

import (
	_ "embed"

	"github.com/holdfast-go/holdfast/internal/luascript"
)

// The scripts run with EVALSHA and fall back to EVAL on NOSCRIPT (after a
// restart, SCRIPT FLUSH or failover): see internal/luascript. Renewal
// uses redsync's own touch script.
var (
	//go:embed scripts/acquire.lua
	acquireSrc    string
	acquireScript = luascript.New(acquireSrc)

	//go:embed scripts/raise.lua
	raiseSrc    string
	raiseScript = luascript.New(raiseSrc)

	//go:embed scripts/release.lua
	releaseSrc    string
	releaseScript = luascript.New(releaseSrc)
)

// Key suffixes, as in package lease.
const (
	fenceSuffix   = ":fence"
	releaseSuffix = ":released"
)
