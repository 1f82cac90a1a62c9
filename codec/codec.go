// Package codec encrypts the payloads our processes hand to Temporal: workflow inputs and
// results, signals, updates, queries, activity inputs and results, memos and failures. The
// Temporal server, its database and every export then hold only ciphertext; the worker, the
// watcher, the starter and the codec server (`starter codec-server`, for the UI and the
// temporal CLI) hold the keys.
//
// Each payload is sealed whole (its metadata and data, as protobuf) with AES-256-GCM under a
// random 96-bit nonce, and the key's ID bound in as additional data. The sealed payload's
// metadata says how to open it:
//
//	encoding:          binary/encrypted
//	encryption-key-id: <ID of the key that sealed it>
//	data:              nonce (12 bytes) || ciphertext and tag
//
// The first key of the key file seals; any key listed opens, so keys rotate without
// re-encrypting histories (see ParseKeys and docs/codec.md).
package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"
)

// Metadata of a sealed payload.
const (
	// MetadataEncodingEncrypted is the encoding of a sealed payload.
	MetadataEncodingEncrypted = "binary/encrypted"
	// MetadataKeyID names the key that sealed the payload.
	MetadataKeyID = "encryption-key-id"
)

// digestLabel derives the pod-spec digest key from the current key (see DigestKey).
const digestLabel = "temporal-rollout.io/pod-spec-digest"

// Codec is an AES-256-GCM converter.PayloadCodec with rotating keys.
type Codec struct {
	current string
	secret  []byte
	aeads   map[string]cipher.AEAD
}

var _ converter.PayloadCodec = (*Codec)(nil)

// New builds a codec over keys: keys[0] seals, every key opens.
func New(keys Keys) (*Codec, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("new codec: no key")
	}
	c := &Codec{current: keys[0].ID, secret: append([]byte(nil), keys[0].Secret...), aeads: map[string]cipher.AEAD{}}
	for _, k := range keys {
		if _, dup := c.aeads[k.ID]; dup {
			return nil, fmt.Errorf("new codec: key ID %q listed twice", k.ID)
		}
		if len(k.Secret) != KeySize {
			return nil, fmt.Errorf("new codec: key %q is %d bytes, want %d", k.ID, len(k.Secret), KeySize)
		}
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("new codec: key %q: %w", k.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("new codec: key %q: %w", k.ID, err)
		}
		c.aeads[k.ID] = aead
	}
	return c, nil
}

// Load builds a codec from a key file (see ParseKeys).
func Load(path string) (*Codec, error) {
	keys, err := LoadKeyFile(path)
	if err != nil {
		return nil, err
	}
	return New(keys)
}

// KeyID is the ID of the key that seals.
func (c *Codec) KeyID() string { return c.current }

// Encode seals every payload with the current key. A payload already sealed is an error: the
// SDK encodes each payload once, and sealing twice would hide a wiring mistake.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	aead := c.aeads[c.current]
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if encrypted(p) {
			return payloads, fmt.Errorf("encode payload %d: already encrypted (with key %q)", i, p.GetMetadata()[MetadataKeyID])
		}
		plain, err := proto.Marshal(p)
		if err != nil {
			return payloads, fmt.Errorf("encode payload %d: marshal: %w", i, err)
		}
		nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
		if _, err := rand.Read(nonce); err != nil {
			return payloads, fmt.Errorf("encode payload %d: nonce: %w", i, err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(MetadataEncodingEncrypted),
				MetadataKeyID:              []byte(c.current),
			},
			Data: aead.Seal(nonce, nonce, plain, []byte(c.current)),
		}
	}
	return out, nil
}

// Decode opens every sealed payload with the key its metadata names, and passes any other
// payload through (histories written before the codec was turned on).
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if !encrypted(p) {
			out[i] = p
			continue
		}
		id, ok := p.GetMetadata()[MetadataKeyID]
		if !ok {
			return payloads, fmt.Errorf("decode payload %d: encrypted, but metadata %s is missing", i, MetadataKeyID)
		}
		aead, ok := c.aeads[string(id)]
		if !ok {
			return payloads, fmt.Errorf("decode payload %d: unknown key ID %q (not in the codec key file)", i, id)
		}
		data := p.GetData()
		if len(data) < aead.NonceSize()+aead.Overhead() {
			return payloads, fmt.Errorf("decode payload %d: ciphertext of %d bytes is too short", i, len(data))
		}
		plain, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], id)
		if err != nil {
			return payloads, fmt.Errorf("decode payload %d with key %q: %w", i, id, err)
		}
		var dp commonpb.Payload
		if err := proto.Unmarshal(plain, &dp); err != nil {
			return payloads, fmt.Errorf("decode payload %d: unmarshal: %w", i, err)
		}
		out[i] = &dp
	}
	return out, nil
}

func encrypted(p *commonpb.Payload) bool {
	return string(p.GetMetadata()[converter.MetadataEncoding]) == MetadataEncodingEncrypted
}

// DataConverter is the SDK's default data converter with payloads sealed by c.
func (c *Codec) DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// FailureConverter seals failures' messages and stack traces too (the SDK's default leaves
// them in clear): they are moved into the failure's encoded attributes, which dc seals, and
// the message the server sees is "Encoded failure". Types (the error kinds the workflow reacts
// to) stay in clear.
func FailureConverter(dc converter.DataConverter) converter.FailureConverter {
	return temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{DataConverter: dc, EncodeCommonAttributes: true})
}

// DigestKey is the key of the keyed pod-spec digests (activities' redacted snapshots):
// HMAC-SHA256(current key, "temporal-rollout.io/pod-spec-digest"). It is never the encryption
// key itself, and a digest made with it cannot be checked against guessed specs without the
// key. It changes with the current key.
func (c *Codec) DigestKey() []byte {
	m := hmac.New(sha256.New, c.secret)
	m.Write([]byte(digestLabel))
	return m.Sum(nil)
}
