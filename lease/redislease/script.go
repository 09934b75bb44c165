package redislease

import (
	_ "embed"

	"github.com/holdfast-go/holdfast/internal/leaselua"
	"github.com/holdfast-go/holdfast/internal/luascript"
)

// Scripts run with EVALSHA and fall back to EVAL on NOSCRIPT (after a
// SCRIPT FLUSH, a restart or a failover): see internal/luascript. Their
// commands are prepared once per handle (see redisHandle). Acquire and
// release are internal/leaselua's functions, shared with the scripts of
// other packages that take or give back a lease in their own round trip.
var (
	//go:embed scripts/acquire.lua
	acquireSrc    string
	acquireScript = luascript.New(leaselua.Acquire, acquireSrc)

	//go:embed scripts/renew.lua
	renewSrc    string
	renewScript = luascript.New(renewSrc)

	//go:embed scripts/release.lua
	releaseSrc    string
	releaseScript = luascript.New(leaselua.Release, releaseSrc)

	//go:embed scripts/inspect.lua
	inspectSrc    string
	inspectScript = luascript.New(inspectSrc)
)

// cmdEvalSha is the command name, boxed once.
var cmdEvalSha any = luascript.EvalSha
