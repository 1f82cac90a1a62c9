//go:build ignore

// mkzip writes zoneinfo.zip from a compiled time zone database (the /usr/share/zoneinfo of a
// tzdata package, or zic's output of an IANA release): every TZif file but those under posix/
// and right/, and localtime and posixrules, stored uncompressed, with +VERSION holding the
// release, as zoneinfo.Version must say:
//
//	go run internal/zoneinfo/mkzip.go /path/to/zoneinfo 2026b internal/zoneinfo/zoneinfo.zip
package main

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: go run mkzip.go ZONEINFO-DIR VERSION OUT.zip")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "mkzip:", err)
		os.Exit(1)
	}
}

func run(root, version, out string) error {
	var names []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if rel == "posix" || rel == "right" {
				return filepath.SkipDir
			}
			return nil
		}
		if rel == "localtime" || rel == "posixrules" || strings.Contains(rel, ".") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.HasPrefix(b, []byte("TZif")) {
			names = append(names, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	add := func(name string, b []byte) error {
		f, err := w.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		if err != nil {
			return err
		}
		_, err = f.Write(b)
		return err
	}
	if err := add("+VERSION", []byte(version+"\n")); err != nil {
		return err
	}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(n)))
		if err != nil {
			return err
		}
		if err := add(n, b); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	fmt.Printf("%d zones, tzdata %s\n", len(names), version)
	return os.WriteFile(out, buf.Bytes(), 0o644)
}
