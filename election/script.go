package election

import (
	_ "embed"

	"github.com/holdfast-go/holdfast/internal/luascript"
)

// Scripts run with EVALSHA and fall back to EVAL on NOSCRIPT (see
// internal/luascript).
var (
	//go:embed scripts/announce.lua
	announceSrc    string
	announceScript = luascript.New(announceSrc)

	//go:embed scripts/leader.lua
	leaderSrc    string
	leaderScript = luascript.New(leaderSrc)
)
