package release

// This file is who may approve a wave and how a signed approval is checked: the normalized
// approver name, approval.from and the release's groups, and SSH signatures (the SSHSIG format
// of `ssh-keygen -Y sign`, checked against an allowed-signers list as git checks signed
// commits). Everything here is pure: the workflow's approve validator calls it, and so does
// `starter release approve --sign-key`, so both sides compute the same message and digest.

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/crypto/ssh"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// SignatureNamespace is the SSHSIG namespace of an approval signature (ssh-keygen's -n): a
// signature made for git ("git") or anything else does not verify as an approval.
const SignatureNamespace = "temporal-rollout-approval"

// NormalizeApprover is the name an approver counts as, as PRECIS's UsernameCaseMapped profile
// (RFC 8265) would compare it: trimmed, without invisible characters, NFKC (fullwidth and
// other compatibility forms become the plain letters), cut at the first '@', case folded
// (an i with a combining dot above, from a folded İ, is i).
// "alice@laptop", "Alice@bastion", "ALICE", "ａｌｉｃｅ" (fullwidth) and "al\u200bice" (a
// zero-width space inside) are all "alice": the part after '@' is the host `starter`'s
// default identity (user@host) adds, or a mail domain, never a second person. Two people who
// share a local part count as one approver; name them apart (alice.smith, alice.jones).
//
// A name can still look like another without being equal to it: "аlice" with a Cyrillic
// "а" (U+0430) is "аlice", not "alice". CheckApprover refuses such names; an approval is
// judged by it.
func NormalizeApprover(name string) string {
	n, _ := approverName(name)
	return n
}

// CheckApprover is NormalizeApprover's name, or why the name is refused as an approver's:
//   - it holds an invisible or format character: a control character (Cc), a format
//     character (Cf: U+200B zero-width space, U+200D zero-width joiner, U+00AD soft hyphen,
//     U+202E right-to-left override), a variation selector or another default-ignorable
//     code point (U+3164 Hangul filler): "al\u200bice" is refused, not read as alice;
//   - its name (before '@') mixes scripts: "аlice" (Cyrillic а, U+0430, then Latin) or
//     "αlice" (Greek α) is refused. Digits, punctuation and combining marks (Common,
//     Inherited) go with any script, and Latin may go with Han, Hiragana and Katakana, with
//     Han and Bopomofo, or with Han and Hangul (UTS #39's "highly restrictive"), so "алиса"
//     (all Cyrillic), "alice.smith-2" and "山田taro" are names.
//
// Fullwidth letters are not refused: "ａｌｉｃｅ" is alice, and counts as alice.
func CheckApprover(name string) (string, error) {
	return approverName(name)
}

// approverName is NormalizeApprover's name and CheckApprover's verdict.
func approverName(name string) (string, error) {
	n := strings.TrimSpace(name)
	var err error
	if i := strings.IndexFunc(n, invisible); i >= 0 {
		r, _ := utf8.DecodeRuneInString(n[i:])
		err = fmt.Errorf("approver %+q holds %U, an invisible or format character: spell the name without it", name, r)
	}
	n = strings.Map(func(r rune) rune {
		if invisible(r) {
			return -1
		}
		return r
	}, n)
	n = norm.NFKC.String(n)
	n, _, _ = strings.Cut(n, "@")
	n = norm.NFKC.String(cases.Fold().String(strings.TrimSpace(n)))
	// Folding keeps the dot of a dotted capital I as a combining dot above (İ is "i\u0307"),
	// which looks like i's own: "ALİCE" is alice, as strings.ToLower made it before.
	n = strings.ReplaceAll(n, "i\u0307", "i")
	if err == nil {
		if scripts := mixedScripts(n); scripts != nil {
			err = fmt.Errorf("approver %+q mixes scripts (%s): a name is written in one (a look-alike letter from another script makes it another name)", name, strings.Join(scripts, ", "))
		}
	}
	return n, err
}

// invisible: a control or format character, a variation selector or another default-ignorable
// code point; none shows, so a name holding one looks like the name without it.
func invisible(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point)
}

// mixedScripts is the scripts of name's letters, sorted, when they mix scripts that do not go
// together (see CheckApprover); nil when they do. "аlice": [Cyrillic Latin].
func mixedScripts(name string) []string {
	set := map[string]bool{}
	for _, r := range name {
		// A rune is in at most one script's table, so the order of the search does not
		// change the answer.
		//workflowcheck:ignore
		for script, table := range unicode.Scripts {
			if unicode.Is(table, r) {
				if script != "Common" && script != "Inherited" {
					set[script] = true
				}
				break
			}
		}
	}
	if len(set) <= 1 {
		return nil
	}
	scripts := make([]string, 0, len(set))
	// Only collects the keys, sorted below.
	//workflowcheck:ignore
	for s := range set {
		scripts = append(scripts, s)
	}
	sort.Strings(scripts)
	for _, allowed := range [][]string{
		{"Han", "Hiragana", "Katakana", "Latin"},
		{"Bopomofo", "Han", "Latin"},
		{"Han", "Hangul", "Latin"},
	} {
		if subset(scripts, allowed) {
			return nil
		}
	}
	return scripts
}

// subset: every one of a is in b.
func subset(a, b []string) bool {
	for _, x := range a {
		if !containsString(b, x) {
			return false
		}
	}
	return true
}

// legacyNormalizeApprover is NormalizeApprover before the change release-approver-names:
// trimmed, lowercased (strings.ToLower), cut at the first '@'. Runs begun before it judge
// approvals with it, and Spec.Validate keeps it, so that a spec valid before is valid still.
func legacyNormalizeApprover(name string) string {
	n := strings.ToLower(strings.TrimSpace(name))
	n, _, _ = strings.Cut(n, "@")
	return strings.TrimSpace(n)
}

// ChangeDigest is "sha256:<hex>" of the change in canonical JSON (canonical.go: object keys
// sorted, no blanks, numbers exactly as written), so the same change spelled in other YAML or
// JSON has the same digest, and two patches that differ in one digit of a large number
// (runAsUser 9007199254740993 and 9007199254740992) have two. A signed approval names it.
func ChangeDigest(c Change) string {
	var canon struct {
		Images map[string]string `json:"images,omitempty"`
		Patch  json.RawMessage   `json:"patch,omitempty"`
	}
	canon.Images = c.Images
	if len(c.Patch) > 0 {
		if json.Valid(c.Patch) {
			canon.Patch = c.Patch
		} else {
			canon.Patch, _ = json.Marshal(string(c.Patch))
		}
	}
	d, err := canonicalDigest(canon)
	if err != nil {
		return legacyChangeDigest(c)
	}
	return d
}

// legacyChangeDigest is ChangeDigest before the change release-worker-policy: the patch
// decoded with its numbers as float64, so numbers past 2^53 could collide. Runs begun before
// it check signatures with it.
func legacyChangeDigest(c Change) string {
	var canon struct {
		Images map[string]string `json:"images,omitempty"`
		Patch  any               `json:"patch,omitempty"`
	}
	canon.Images = c.Images
	if len(c.Patch) > 0 {
		var v any
		if err := json.Unmarshal(c.Patch, &v); err == nil {
			canon.Patch = v
		} else {
			canon.Patch = string(c.Patch)
		}
	}
	b, _ := json.Marshal(canon) // maps marshal with sorted keys
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ApprovalMessage is what an approver signs for one wave of one release:
//
//	temporal-rollout approval
//	release web-1-27
//	wave canary
//	change sha256:9f86d0...
//
// so a signature approves that wave of that release with that change and nothing else.
func ApprovalMessage(release, wave, changeDigest string) []byte {
	return fmt.Appendf(nil, "temporal-rollout approval\nrelease %s\nwave %s\nchange %s\n", release, wave, changeDigest)
}

// AllowedSigner is one line of an allowed-signers list: the principals (normalized) and
// their key.
type AllowedSigner struct {
	Principals []string
	Key        ssh.PublicKey
}

// ParseAllowedSigners reads an allowed-signers list in ssh-keygen's format (the one git's
// gpg.ssh.allowedSignersFile uses), one signer a line:
//
//	alice@example.com,alice@corp ssh-ed25519 AAAAC3Nza... alice's laptop
//	bob namespaces="temporal-rollout-approval,git" ssh-ed25519 AAAAC3Nza...
//
// Blank lines and lines starting with '#' are skipped. Of the options, namespaces is
// honoured (a line whose namespaces leave out temporal-rollout-approval is skipped);
// cert-authority, valid-after and valid-before, and principal patterns (* and ?), are
// refused: they are not implemented, and a signer list must not say more than is checked.
func ParseAllowedSigners(list string) ([]AllowedSigner, error) {
	return parseAllowedSigners(list, NormalizeApprover)
}

// parseAllowedSignersNS is ParseAllowedSigners for signatures of namespace ns (a release's
// start signature: ReleaseSignatureNamespace).
func parseAllowedSignersNS(list, ns string) ([]AllowedSigner, error) {
	return parseAllowedSignersIn(list, ns, NormalizeApprover)
}

// parseAllowedSigners is ParseAllowedSigners with the principals normalized by normalize
// (legacyNormalizeApprover for runs begun before release-approver-names).
func parseAllowedSigners(list string, normalize func(string) string) ([]AllowedSigner, error) {
	return parseAllowedSignersIn(list, SignatureNamespace, normalize)
}

func parseAllowedSignersIn(list, ns string, normalize func(string) string) ([]AllowedSigner, error) {
	var out []AllowedSigner
	for n, line := range strings.Split(list, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, ok, err := parseSignerLine(line, ns, normalize)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		if ok {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no signer for namespace " + ns)
	}
	return out, nil
}

func parseSignerLine(line, ns string, normalize func(string) string) (AllowedSigner, bool, error) {
	var principals, rest string
	if strings.HasPrefix(line, `"`) {
		end := strings.Index(line[1:], `"`)
		if end < 0 {
			return AllowedSigner{}, false, errors.New("unterminated quoted principals")
		}
		principals, rest = line[1:end+1], line[end+2:]
	} else {
		principals, rest, _ = strings.Cut(line, " ")
	}
	var s AllowedSigner
	for _, p := range strings.Split(principals, ",") {
		if strings.ContainsAny(p, "*?!") {
			return s, false, fmt.Errorf("principal pattern %q: patterns are not supported, name each principal", p)
		}
		if np := normalize(p); np != "" {
			s.Principals = append(s.Principals, np)
		}
	}
	if len(s.Principals) == 0 {
		return s, false, errors.New("no principal")
	}
	key, _, options, _, err := ssh.ParseAuthorizedKey([]byte(strings.TrimSpace(rest)))
	if err != nil {
		return s, false, fmt.Errorf("principals %s: key: %w", principals, err)
	}
	s.Key = key
	for _, o := range options {
		name, value, _ := strings.Cut(o, "=")
		switch strings.ToLower(name) {
		case "namespaces":
			found := false
			for _, n := range strings.Split(strings.Trim(value, `"`), ",") {
				found = found || strings.TrimSpace(n) == ns
			}
			if !found {
				return s, false, nil
			}
		default:
			return s, false, fmt.Errorf("principals %s: option %q is not supported (only namespaces)", principals, o)
		}
	}
	return s, true, nil
}

// SignApproval signs msg as `ssh-keygen -Y sign -n temporal-rollout-approval` would, and
// returns the armored signature ("-----BEGIN SSH SIGNATURE-----"). RSA keys sign with
// rsa-sha2-512.
func SignApproval(signer ssh.Signer, msg []byte) (string, error) {
	return signSSHSIG(signer, SignatureNamespace, msg, rand.Reader)
}

// SignRelease signs a release's start (ReleaseMessage) as `ssh-keygen -Y sign -n
// temporal-rollout-release` would.
func SignRelease(signer ssh.Signer, msg []byte) (string, error) {
	return signSSHSIG(signer, ReleaseSignatureNamespace, msg, rand.Reader)
}

func signSSHSIG(signer ssh.Signer, namespace string, msg []byte, random io.Reader) (string, error) {
	data := sshsigSignedData(namespace, "sha512", msg)
	var sig *ssh.Signature
	var err error
	if as, ok := signer.(ssh.AlgorithmSigner); ok && signer.PublicKey().Type() == ssh.KeyAlgoRSA {
		sig, err = as.SignWithAlgorithm(random, data, ssh.KeyAlgoRSASHA512)
	} else {
		sig, err = signer.Sign(random, data)
	}
	if err != nil {
		return "", fmt.Errorf("sign approval: %w", err)
	}
	blob := ssh.Marshal(struct {
		Magic     [6]byte
		Version   uint32
		PublicKey []byte
		Namespace string
		Reserved  string
		Hash      string
		Signature []byte
	}{sshsigMagic, 1, signer.PublicKey().Marshal(), namespace, "", "sha512", ssh.Marshal(sig)})
	return string(pem.EncodeToMemory(&pem.Block{Type: "SSH SIGNATURE", Bytes: blob})), nil
}

var sshsigMagic = [6]byte{'S', 'S', 'H', 'S', 'I', 'G'}

// sshsigSignedData is the blob an SSHSIG signature signs (PROTOCOL.sshsig): the magic, the
// namespace, a reserved string, the hash algorithm and the message's hash.
func sshsigSignedData(namespace, hash string, msg []byte) []byte {
	var h []byte
	switch hash {
	case "sha256":
		s := sha256.Sum256(msg)
		h = s[:]
	default:
		s := sha512.Sum512(msg)
		h = s[:]
	}
	return ssh.Marshal(struct {
		Magic     [6]byte
		Namespace string
		Reserved  string
		Hash      string
		H         []byte
	}{sshsigMagic, namespace, "", hash, h})
}

// verifyApproval checks an armored SSHSIG signature of msg by approver (normalized) against
// the allowed signers, and says why it fails: not a signature, the wrong namespace, a key
// the list does not give the approver (forged), or a signature of another message (replayed
// from another release, wave or change, or damaged). Deterministic: it reads only its
// arguments.
func verifyApproval(armored string, msg []byte, approver string, signers []AllowedSigner) error {
	_, err := verifySSHSIG(armored, SignatureNamespace, "approval.signers", msg, approver, signers)
	return err
}

// verifySSHSIG is verifyApproval for signatures of namespace ns, by a key list (named in the
// error, "approval.signers").
func verifySSHSIG(armored, ns, list string, msg []byte, approver string, signers []AllowedSigner) (ssh.PublicKey, error) {
	block, _ := pem.Decode([]byte(strings.TrimSpace(armored)))
	if block == nil || block.Type != "SSH SIGNATURE" {
		return nil, errors.New("the signature is not an armored SSH signature (-----BEGIN SSH SIGNATURE-----)")
	}
	var sig struct {
		Magic     [6]byte
		Version   uint32
		PublicKey []byte
		Namespace string
		Reserved  string
		Hash      string
		Signature []byte
	}
	if err := ssh.Unmarshal(block.Bytes, &sig); err != nil || sig.Magic != sshsigMagic || sig.Version != 1 {
		return nil, errors.New("the signature is not an SSHSIG signature, version 1")
	}
	if sig.Namespace != ns {
		return nil, fmt.Errorf("the signature is for namespace %q, not %q", sig.Namespace, ns)
	}
	if sig.Hash != "sha256" && sig.Hash != "sha512" {
		return nil, fmt.Errorf("the signature's hash %q is neither sha256 nor sha512", sig.Hash)
	}
	key, err := ssh.ParsePublicKey(sig.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("the signature's public key: %w", err)
	}
	var s ssh.Signature
	if err := ssh.Unmarshal(sig.Signature, &s); err != nil {
		return nil, fmt.Errorf("the signature's signature blob: %w", err)
	}
	listed := false
	for _, a := range signers {
		if bytes.Equal(a.Key.Marshal(), key.Marshal()) && containsString(a.Principals, approver) {
			listed = true
			break
		}
	}
	if !listed {
		return nil, fmt.Errorf("forged: signed with key %s, which %s does not list for %s", ssh.FingerprintSHA256(key), list, approver)
	}
	if err := key.Verify(sshsigSignedData(sig.Namespace, sig.Hash, msg), &s); err != nil {
		return nil, fmt.Errorf("%s's key %s did not sign this %s (%s): the signature is for another release, wave or change (replayed), or damaged", approver, ssh.FingerprintSHA256(key), what(ns), strings.ReplaceAll(strings.TrimSpace(string(msg)), "\n", ", "))
	}
	return key, nil
}

// what names what a signature of namespace ns signs.
func what(ns string) string {
	if ns == ReleaseSignatureNamespace {
		return "release"
	}
	return "approval"
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// mayApprove is the names approval.from admits, normalized by normalize: its people, and the
// members of its groups (Spec.Groups); nil when from is empty (anyone).
func (s *Spec) mayApprove(from []string, normalize func(string) string) []string {
	if len(from) == 0 {
		return nil
	}
	set := map[string]bool{}
	for _, f := range from {
		if members, ok := s.Groups[f]; ok {
			for _, m := range members {
				set[normalize(m)] = true
			}
			continue
		}
		set[normalize(f)] = true
	}
	names := make([]string, 0, len(set))
	// Only collects the keys, sorted below.
	//workflowcheck:ignore
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// SpecDigest is "sha256:<hex>" of the release's whole spec in canonical JSON (canonical.go),
// without the state a run hands over (Resume) and the start's own signature
// (AuthorSignature): what the author signs, and part of what an approval signs.
func SpecDigest(s Spec) string {
	s.Resume, s.AuthorSignature = nil, ""
	d, _ := canonicalDigest(s)
	return d
}

// ReleaseMessage is what an author signs to start a release (SignRelease, or
// `ssh-keygen -Y sign -n temporal-rollout-release`):
//
//	temporal-rollout release
//	release web-1-27
//	author alice
//	spec sha256:4c1a...
//
// The author is the normalized name (NormalizeApprover) the policy's authors list gives the key.
func ReleaseMessage(s Spec) []byte {
	return fmt.Appendf(nil, "temporal-rollout release\nrelease %s\nauthor %s\nspec %s\n", s.Name, NormalizeApprover(s.Author), SpecDigest(s))
}

// WaveDigest is "sha256:<hex>" of what approving wave wi approves, in canonical JSON: the
// whole release spec (SpecDigest's), the wave's name, its Deployments as the release read them
// ("cluster:namespace/name", in the status' order) and the policy in force.
func WaveDigest(s Spec, wi int, targets []TargetStatus, p Policy) string {
	s.Resume, s.AuthorSignature = nil, ""
	names := []string{}
	for _, t := range targets {
		if t.Wave == s.Waves[wi].Name {
			names = append(names, targetString(t.Cluster, t.Namespace, t.Name))
		}
	}
	d, _ := canonicalDigest(struct {
		Spec    Spec     `json:"spec"`
		Wave    string   `json:"wave"`
		Targets []string `json:"targets"`
		Policy  Policy   `json:"policy"`
	}{s, s.Waves[wi].Name, names, p})
	return d
}

// ApprovalBinding is everything one signed approval is bound to.
type ApprovalBinding struct {
	Release string
	Wave    string
	// Run is the release's run value (Status.Run): no signature outlives its release.
	Run string
	// Approver is the normalized name (NormalizeApprover) the signature approves as.
	Approver string
	// NotAfter: the approval is refused after it.
	NotAfter time.Time
	// Digest is the WaveDigest.
	Digest string
}

// Message is what the approver signs (SignApproval, or `ssh-keygen -Y sign -n
// temporal-rollout-approval`):
//
//	temporal-rollout approval v2
//	release web-1-27
//	wave canary
//	run 0f7c...
//	approver bob
//	not-after 2026-11-29T12:00:00Z
//	digest sha256:9f86d0...
func (b ApprovalBinding) Message() []byte {
	return fmt.Appendf(nil, "temporal-rollout approval v2\nrelease %s\nwave %s\nrun %s\napprover %s\nnot-after %s\ndigest %s\n",
		b.Release, b.Wave, b.Run, b.Approver, b.NotAfter.UTC().Format(time.RFC3339), b.Digest)
}
