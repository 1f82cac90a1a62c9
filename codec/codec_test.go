package codec

import (
	"bytes"
	"encoding/base64"
	"os"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func keyLine(id string, b byte) string {
	return id + "=" + base64.StdEncoding.EncodeToString(testKey(b))
}

func mustCodec(t *testing.T, lines ...string) *Codec {
	t.Helper()
	keys, err := ParseKeys([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatalf("parse keys: %v", err)
	}
	c, err := New(keys)
	if err != nil {
		t.Fatalf("new codec: %v", err)
	}
	return c
}

func payload(t *testing.T, v any) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseKeys(t *testing.T) {
	tests := []struct {
		name    string
		give    string
		want    []string // key IDs, in order
		wantErr string
	}{
		{name: "one key", give: keyLine("k1", 1), want: []string{"k1"}},
		{
			name: "comments, blank lines and spaces",
			give: "# rotated 2025-06\n\n  " + "k2 = " + base64.StdEncoding.EncodeToString(testKey(2)) + "  \n" + keyLine("k1", 1) + "\n",
			want: []string{"k2", "k1"},
		},
		{name: "empty", give: "", wantErr: "no key"},
		{name: "only comments", give: "# nothing\n\n", wantErr: "no key"},
		{name: "no ID", give: base64.StdEncoding.EncodeToString(testKey(1)), wantErr: "line 1: want ID=BASE64KEY, found no key"},
		{name: "empty ID", give: "=" + base64.StdEncoding.EncodeToString(testKey(1)), wantErr: "must be 1-64 characters"},
		{name: "bad ID", give: "a/b=" + base64.StdEncoding.EncodeToString(testKey(1)), wantErr: "may hold only"},
		{name: "bare key with / and +", give: "ab/+" + base64.StdEncoding.EncodeToString(testKey(1))[4:], wantErr: "line 1: want ID=BASE64KEY"},
		{name: "bad base64", give: "k1=not*base64", wantErr: `line 1: key "k1" is not standard base64`},
		{name: "wrong length", give: "k1=" + base64.StdEncoding.EncodeToString(make([]byte, 16)), wantErr: `key "k1" is 16 bytes, want 32`},
		{name: "empty key", give: "k1=", wantErr: "found no key after '='"},
		{name: "duplicate ID", give: keyLine("k1", 1) + "\n" + keyLine("k1", 2), wantErr: `line 2: key ID "k1" listed twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := ParseKeys([]byte(tt.give))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseKeys error = %v, want one containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), base64.StdEncoding.EncodeToString(testKey(1))) {
					t.Errorf("error %q shows the key", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseKeys: %v", err)
			}
			var got []string
			for _, k := range keys {
				got = append(got, k.ID)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("key IDs = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLoadKeyFile(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		give    string // file content; "" with missing set: no file
		missing bool
		wantErr string
	}{
		{name: "valid", give: keyLine("k1", 1)},
		{name: "missing", missing: true, wantErr: "read codec key file"},
		{name: "empty", give: "", wantErr: "no key"},
		{name: "wrong length", give: "k1=" + base64.StdEncoding.EncodeToString(make([]byte, 31)), wantErr: "31 bytes"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := dir + "/keys" + string(rune('a'+i))
			if !tt.missing {
				writeFile(t, path, tt.give)
			}
			_, err := Load(path)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
				t.Errorf("Load error = %v, want one naming %s and containing %q", err, path, tt.wantErr)
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	c := mustCodec(t, keyLine("k1", 1))
	tests := []struct {
		name string
		give any
	}{
		{name: "string", give: "kubernetes.io/change-cause: image nginx:1.27"},
		{name: "struct", give: map[string]string{"app": "secret-label", "team": "payments"}},
		{name: "nil", give: nil},
		{name: "bytes", give: []byte{0, 1, 2, 255}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := payload(t, tt.give)
			enc, err := c.Encode([]*commonpb.Payload{p})
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if got := string(enc[0].Metadata[converter.MetadataEncoding]); got != MetadataEncodingEncrypted {
				t.Errorf("encoding = %q, want %q", got, MetadataEncodingEncrypted)
			}
			if got := string(enc[0].Metadata[MetadataKeyID]); got != "k1" {
				t.Errorf("key ID = %q, want k1", got)
			}
			if len(p.Data) > 4 && bytes.Contains(enc[0].Data, p.Data) {
				t.Errorf("ciphertext holds the plaintext %q", p.Data)
			}
			dec, err := c.Decode(enc)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !proto.Equal(dec[0], p) {
				t.Errorf("round trip = %v, want %v", dec[0], p)
			}
		})
	}
}

// Two encodings of one payload differ: the nonce is random.
func TestRandomNonce(t *testing.T) {
	c := mustCodec(t, keyLine("k1", 1))
	p := payload(t, "same")
	a, err := c.Encode([]*commonpb.Payload{p})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Encode([]*commonpb.Payload{p})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a[0].Data, b[0].Data) {
		t.Errorf("two encodings of one payload are equal: %x", a[0].Data)
	}
}

func TestRotation(t *testing.T) {
	old := mustCodec(t, keyLine("2025-01", 1))
	rotated := mustCodec(t, keyLine("2025-06", 2), keyLine("2025-01", 1))
	sealedOld, err := old.Encode([]*commonpb.Payload{payload(t, "before the rotation")})
	if err != nil {
		t.Fatal(err)
	}
	sealedNew, err := rotated.Encode([]*commonpb.Payload{payload(t, "after the rotation")})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		codec     *Codec
		give      *commonpb.Payload
		wantKeyID string
		want      string
		wantErr   string
	}{
		{name: "the old key still decrypts", codec: rotated, give: sealedOld[0], wantKeyID: "2025-01", want: `"before the rotation"`},
		{name: "the new key encrypts and decrypts", codec: rotated, give: sealedNew[0], wantKeyID: "2025-06", want: `"after the rotation"`},
		{name: "a codec without the new key cannot", codec: old, give: sealedNew[0], wantKeyID: "2025-06", wantErr: `unknown key ID "2025-06"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(tt.give.Metadata[MetadataKeyID]); got != tt.wantKeyID {
				t.Errorf("sealed with %q, want %q", got, tt.wantKeyID)
			}
			dec, err := tt.codec.Decode([]*commonpb.Payload{tt.give})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Decode error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if got := string(dec[0].Data); got != tt.want {
				t.Errorf("decoded %s, want %s", got, tt.want)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	c := mustCodec(t, keyLine("k1", 1))
	sealed, err := c.Encode([]*commonpb.Payload{payload(t, "secret")})
	if err != nil {
		t.Fatal(err)
	}
	with := func(f func(p *commonpb.Payload)) *commonpb.Payload {
		p := proto.Clone(sealed[0]).(*commonpb.Payload)
		f(p)
		return p
	}
	tests := []struct {
		name    string
		give    *commonpb.Payload
		wantErr string
	}{
		{name: "tampered ciphertext", give: with(func(p *commonpb.Payload) { p.Data[len(p.Data)-20] ^= 1 }), wantErr: `decode payload 0 with key "k1": cipher: message authentication failed`},
		{name: "tampered nonce", give: with(func(p *commonpb.Payload) { p.Data[0] ^= 1 }), wantErr: "message authentication failed"},
		{name: "key ID swapped", give: with(func(p *commonpb.Payload) { p.Metadata[MetadataKeyID] = []byte("k2") }), wantErr: `unknown key ID "k2"`},
		{name: "key ID missing", give: with(func(p *commonpb.Payload) { delete(p.Metadata, MetadataKeyID) }), wantErr: "metadata encryption-key-id is missing"},
		{name: "truncated", give: with(func(p *commonpb.Payload) { p.Data = p.Data[:10] }), wantErr: "too short"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Decode([]*commonpb.Payload{tt.give})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Decode error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// Another key under the same ID fails authentication: the ID is not trusted alone.
func TestWrongKeySameID(t *testing.T) {
	a := mustCodec(t, keyLine("k1", 1))
	b := mustCodec(t, keyLine("k1", 2))
	sealed, err := a.Encode([]*commonpb.Payload{payload(t, "secret")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Decode(sealed); err == nil || !strings.Contains(err.Error(), "message authentication failed") {
		t.Errorf("Decode with another key = %v, want an authentication failure", err)
	}
}

func TestEncodeAlreadyEncrypted(t *testing.T) {
	c := mustCodec(t, keyLine("k1", 1))
	sealed, err := c.Encode([]*commonpb.Payload{payload(t, "secret")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Encode(sealed); err == nil || !strings.Contains(err.Error(), `already encrypted (with key "k1")`) {
		t.Errorf("Encode of a sealed payload = %v, want an already-encrypted error", err)
	}
}

// A payload written before the codec was on passes through Decode.
func TestDecodePlain(t *testing.T) {
	c := mustCodec(t, keyLine("k1", 1))
	p := payload(t, "from before the codec")
	dec, err := c.Decode([]*commonpb.Payload{p})
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if !proto.Equal(dec[0], p) {
		t.Errorf("Decode = %v, want %v unchanged", dec[0], p)
	}
}

func TestDataConverter(t *testing.T) {
	c := mustCodec(t, keyLine("k1", 1))
	dc := c.DataConverter()
	p, err := dc.ToPayload(map[string]string{"kubernetes.io/change-cause": "image registry.example/app:v2"})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(p.Data, []byte("registry.example")) || string(p.Metadata[converter.MetadataEncoding]) != MetadataEncodingEncrypted {
		t.Errorf("ToPayload = %v, want it encrypted", p)
	}
	var got map[string]string
	if err := dc.FromPayload(p, &got); err != nil {
		t.Fatal(err)
	}
	if got["kubernetes.io/change-cause"] != "image registry.example/app:v2" {
		t.Errorf("FromPayload = %v, want the change cause back", got)
	}
}

func TestDigestKey(t *testing.T) {
	a := mustCodec(t, keyLine("k1", 1))
	again := mustCodec(t, keyLine("k1", 1), keyLine("k0", 3))
	other := mustCodec(t, keyLine("k2", 2), keyLine("k1", 1))
	if !bytes.Equal(a.DigestKey(), again.DigestKey()) {
		t.Errorf("DigestKey differs for one current key")
	}
	if bytes.Equal(a.DigestKey(), other.DigestKey()) {
		t.Errorf("DigestKey is the same for two current keys")
	}
	if bytes.Equal(a.DigestKey(), testKey(1)) || len(a.DigestKey()) != 32 {
		t.Errorf("DigestKey = %x, want 32 bytes derived from, not equal to, the key", a.DigestKey())
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
