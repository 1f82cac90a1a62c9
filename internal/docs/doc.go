// Package docs has no code: its tests check README.md and docs/ against the code, so that the
// documentation cannot drift from it. They check the tables of docs/operations.md (settings,
// annotations, RBAC, phases and outcomes) against the code's own lists, docs/codec.md's list of
// what stays in clear, and that every measured figure cites a dated entry of BENCHMARKS.md
// (the convention is in figures_test.go). The CLI reference, docs/reference/cli/, is generated
// from the commands and checked by the starter's and the worker's tests.
package docs
