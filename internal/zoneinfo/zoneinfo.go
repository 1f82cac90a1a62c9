// Package zoneinfo loads IANA time zones from a copy of the time zone database compiled into
// the binary, and only from it.
//
// Why not time.LoadLocation with time/tzdata imported: LoadLocation reads $ZONEINFO first, then
// the host's /usr/share/zoneinfo (and a few other directories), then $GOROOT/lib/time, and the
// embedded copy last. Two workers on hosts with different tzdata releases can then place a
// zone's transition differently (a country changes its rules, one host is updated), and a
// workflow that decides on a zone (the release's freeze windows) would decide differently on
// replay. The standard library exports no way to read its embedded copy directly, but it
// exports time.LoadLocationFromTZData, which builds a Location from the zone's TZif data: this
// package embeds the database (zoneinfo.zip: the zones' TZif files, as the Go toolchain's
// lib/time/zoneinfo.zip holds them, and +VERSION, the tzdata release) and reads the zone from
// it. Every worker built from the same commit resolves a zone the same way, whatever its host
// or its Go toolchain.
//
// The copy is tzdata 2026b (Debian's tzdata 2026b-0+deb12u1). TestEmbeddedIsNewest fails
// when the build machine has a newer one (its Go toolchain's, its /usr/share/zoneinfo). To
// update it (a change of zone rules is a change of what open workflows decide: say so in the
// commit and in docs/versioning.md), from a compiled database such as a tzdata package's:
//
//	go run internal/zoneinfo/mkzip.go /usr/share/zoneinfo 2026b internal/zoneinfo/zoneinfo.zip
//
// and set Version.
package zoneinfo

import (
	"archive/zip"
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"sync"
	"time"
)

// Version is the tzdata release of the embedded copy (its +VERSION). The worker logs it at
// start-up and `worker --version` and `starter version` print it.
const Version = "2026b"

//go:embed zoneinfo.zip
var data []byte

// index is the embedded archive's directory, read once; it is never written after.
var index = sync.OnceValues(func() (map[string]*zip.File, error) {
	r, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("read the embedded zone database: %w", err)
	}
	m := make(map[string]*zip.File, len(r.File))
	for _, f := range r.File {
		m[f.Name] = f
	}
	return m, nil
})

// Load returns the zone name ("Europe/Berlin") from the embedded database. "" and "UTC" are
// time.UTC.
func Load(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	files, err := index()
	if err != nil {
		return nil, err
	}
	f, ok := files[name]
	if !ok {
		return nil, fmt.Errorf("unknown time zone %s (tzdata %s)", name, Version)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("read time zone %s: %w", name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("read time zone %s: %w", name, err)
	}
	return time.LoadLocationFromTZData(name, b)
}
