// Package storeutil holds what httpfence's stores share: the lock
// identifier, the stored header codec, the TTL check and the nil-client
// check. It is internal so that the stores in httpfence's subpackages
// (redisstore, pgstore) and httpfence's own memory store use one copy.
package storeutil
