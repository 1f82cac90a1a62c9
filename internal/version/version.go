// Package version is the release the worker and starter binaries report (`worker --version`,
// `starter version`).
package version

import "runtime/debug"

// Dev is the version of a build that says nothing better: `go build` or `go run` outside a
// tagged checkout, with no -X.
const Dev = "0.1.0-dev"

// Version is set at link time by the Makefile and the Dockerfile:
//
//	go build -ldflags "-X github.com/temporal-rollout/rollout/internal/version.Version=0.1.0" ./worker
//
// It is a variable only because -X can set nothing else; nothing assigns it at run time.
// Read it through String.
var Version string

// String is the version: Version when the linker set it, else the main module's version from
// the build info (a tag, or a pseudo-version Go derives from the VCS), else Dev.
func String() string {
	bi, ok := debug.ReadBuildInfo()
	return resolve(Version, bi, ok)
}

func resolve(linked string, bi *debug.BuildInfo, ok bool) string {
	if linked != "" {
		return linked
	}
	if ok && bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return Dev
}
