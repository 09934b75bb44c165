package fence

import (
	"crypto/sha256"
	"encoding/hex"
)

// ownerIDDomain separates OwnerID's hashes from every other SHA-256 of an
// owner string: a hash computed for another purpose never equals an id.
const ownerIDDomain = "holdfast owner id v1\x00"

// OwnerIDLen is the length of OwnerID's result: 12 hex digits (48 bits).
const OwnerIDLen = 12

// OwnerID returns the id under which views, logs and metrics show owner:
// the first OwnerIDLen hex digits of SHA-256 over a fixed domain prefix and
// owner ("" for an empty owner). Every layer shows this id, never the owner
// itself.
//
// Why: the owner is a write capability. With the current token, a writer
// presenting it is accepted by every sink (the acceptance rule takes an
// equal token from the same owner), so an owner read from an admin API, a
// log line or a console would let its reader write as the holder. The id
// cannot be turned back into the owner: package lease draws owners of 128
// random bits, and a 48-bit hash of one leaves about 2^80 owners for each
// id, so no search finds the owner from its id; it still tells the
// acquisitions of one lease apart (two owners share an id with
// probability 2^-48) and lets an operator match a view with a log line.
// An owner chosen by hand with little entropy ("replica-1") is guessable
// from its id: such an owner is no capability to begin with.
func OwnerID(owner string) string {
	if owner == "" {
		return ""
	}
	h := sha256.New()
	h.Write([]byte(ownerIDDomain))
	h.Write([]byte(owner))
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))[:OwnerIDLen]
}
