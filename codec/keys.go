package codec

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
)

// KeySize is the length of an AES-256 key in bytes.
const KeySize = 32

// Key is one named AES-256 key.
type Key struct {
	ID     string
	Secret []byte
}

// Keys are the keys of a key file, in its order: the first encrypts, every one decrypts.
type Keys []Key

// LoadKeyFile reads and parses a key file (see ParseKeys).
func LoadKeyFile(path string) (Keys, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read codec key file: %w", err)
	}
	keys, err := ParseKeys(b)
	if err != nil {
		return nil, fmt.Errorf("codec key file %s: %w", path, err)
	}
	return keys, nil
}

// ParseKeys parses a key file: one key a line, as ID=BASE64, where BASE64 is the standard
// base64 (padded) of 32 random bytes, as `head -c32 /dev/urandom | base64` prints. Blank lines
// and lines starting with # are ignored; spaces around ID and key are trimmed. The first key
// is the current one, which encrypts; every key listed decrypts. An ID is 1-64 letters, digits,
// '.', '_' or '-', and names one key only. Example:
//
//	# newest first: 2025-06 encrypts, 2025-01 still decrypts older histories
//	2025-06=q3Vb9yXb0wO5m8Vq1l7u0v3k8xN2pQ4aR6sT8uW0yZ4=
//	2025-01=0aQ1bR2cS3dT4eU5fV6gW7hX8iY9jZ0kA1lB2mC3nD4=
func ParseKeys(b []byte) (Keys, error) {
	var keys Keys
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, enc, ok := strings.Cut(line, "=")
		if !ok {
			// Nothing of the line is shown: it may be a bare key.
			return nil, fmt.Errorf("line %d: want ID=BASE64KEY", n)
		}
		id, enc = strings.TrimSpace(id), strings.TrimSpace(enc)
		if strings.Trim(enc, "=") == "" {
			// A bare padded key cuts at its padding: nothing shown, the "ID" may be the key.
			return nil, fmt.Errorf("line %d: want ID=BASE64KEY, found no key after '='", n)
		}
		if err := validID(id); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err) // the ID is not shown: it may be a key
		}
		if seen[id] {
			return nil, fmt.Errorf("line %d: key ID %q listed twice", n, id)
		}
		secret, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return nil, fmt.Errorf("line %d: key %q is not standard base64: %w", n, id, err)
		}
		if len(secret) != KeySize {
			return nil, fmt.Errorf("line %d: key %q is %d bytes, want %d (AES-256)", n, id, len(secret), KeySize)
		}
		seen[id] = true
		keys = append(keys, Key{ID: id, Secret: secret})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read keys: %w", err)
	}
	if len(keys) == 0 {
		return nil, errors.New("no key: want at least one ID=BASE64KEY line")
	}
	return keys, nil
}

func validID(id string) error {
	if id == "" || len(id) > 64 {
		return errors.New("a key ID must be 1-64 characters")
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return errors.New("a key ID may hold only letters, digits, '.', '_' and '-'")
		}
	}
	return nil
}
