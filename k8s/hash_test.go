package k8s

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/dump"
)

// referenceHash spells out controller.ComputeHash byte by byte: FNV-32a over the deep-printed
// template, then (with a collision count) the count as 4 little-endian bytes padded to 8.
func referenceHash(template *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	h.Write([]byte(fmt.Sprintf("%v", dump.ForHash(*template))))
	if collisionCount != nil {
		c := uint32(*collisionCount)
		h.Write([]byte{byte(c), byte(c >> 8), byte(c >> 16), byte(c >> 24), 0, 0, 0, 0})
	}
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

func TestPodTemplateHash(t *testing.T) {
	tests := []struct {
		name      string
		giveTmpl  *corev1.PodTemplateSpec
		giveCount *int32
	}{
		{name: "no collision count", giveTmpl: webTemplate("nginx:1.0")},
		{name: "collision count 0", giveTmpl: webTemplate("nginx:1.0"), giveCount: ptrTo(int32(0))},
		{name: "collision count 1", giveTmpl: webTemplate("nginx:1.0"), giveCount: ptrTo(int32(1))},
		{name: "collision count 300", giveTmpl: webTemplate("nginx:1.0"), giveCount: ptrTo(int32(300))},
		{name: "other template", giveTmpl: webTemplate("nginx:1.1")},
		{name: "empty template", giveTmpl: &corev1.PodTemplateSpec{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PodTemplateHash(tt.giveTmpl, tt.giveCount)
			if want := referenceHash(tt.giveTmpl, tt.giveCount); got != want {
				t.Errorf("PodTemplateHash() = %q, want %q", got, want)
			}
			if again := PodTemplateHash(tt.giveTmpl.DeepCopy(), tt.giveCount); again != got {
				t.Errorf("PodTemplateHash(copy) = %q, want %q", again, got)
			}
			// A decimal uint32 has at most 10 digits, each mapped onto the safe alphabet.
			if len(got) == 0 || len(got) > 10 {
				t.Errorf("len(PodTemplateHash()) = %d, want 1..10", len(got))
			}
			for _, r := range got {
				if !strings.ContainsRune("bcdfghjklmnpqrstvwxz2456789", r) {
					t.Errorf("PodTemplateHash() = %q has %q, want only safe characters", got, r)
				}
			}
		})
	}
}

func TestPodTemplateHashChanges(t *testing.T) {
	base := PodTemplateHash(webTemplate("nginx:1.0"), nil)
	withLabel := webTemplate("nginx:1.0")
	withLabel.Labels["tier"] = "front"
	tests := []struct {
		name      string
		giveTmpl  *corev1.PodTemplateSpec
		giveCount *int32
	}{
		{name: "image", giveTmpl: webTemplate("nginx:1.1")},
		{name: "label", giveTmpl: withLabel},
		{name: "collision count 0 differs from none", giveTmpl: webTemplate("nginx:1.0"), giveCount: ptrTo(int32(0))},
		{name: "collision count 1", giveTmpl: webTemplate("nginx:1.0"), giveCount: ptrTo(int32(1))},
	}
	seen := map[string]string{base: "base"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PodTemplateHash(tt.giveTmpl, tt.giveCount)
			if prev, ok := seen[got]; ok {
				t.Errorf("PodTemplateHash() = %q, the same as for %q, want a different hash", got, prev)
			}
			seen[got] = tt.name
		})
	}
}

func TestPodTemplateHashNoCollisions(t *testing.T) {
	seen := make(map[string]int)
	for i := 0; i < 1000; i++ {
		tmpl := webTemplate("registry.example/app:" + strconv.Itoa(i))
		h := PodTemplateHash(tmpl, nil)
		if prev, ok := seen[h]; ok {
			t.Fatalf("PodTemplateHash(version %d) = %q, the same as version %d, want unique", i, h, prev)
		}
		seen[h] = i
	}
}

func TestReplicaSetName(t *testing.T) {
	realHash := PodTemplateHash(webTemplate("nginx:1.0"), nil)
	tests := []struct {
		name           string
		giveDeployment string
		giveHash       string
		want           string
	}{
		{
			name:           "short name",
			giveDeployment: "web",
			giveHash:       "5d4b8c7f9",
			want:           "web-5d4b8c7f9",
		},
		{
			name:           "real hash",
			giveDeployment: "web",
			giveHash:       realHash,
			want:           "web-" + realHash,
		},
		{
			// 242 + 1 + 10 = 253: fits exactly.
			name:           "longest name kept whole",
			giveDeployment: strings.Repeat("a", 242),
			giveHash:       "abcde12345",
			want:           strings.Repeat("a", 242) + "-abcde12345",
		},
		{
			// 250 is cut to 253 − 1 − 10 = 242.
			name:           "long name truncated",
			giveDeployment: strings.Repeat("b", 250),
			giveHash:       "abcde12345",
			want:           strings.Repeat("b", 242) + "-abcde12345",
		},
		{
			// A shorter hash leaves more room: 253 − 1 − 5 = 247.
			name:           "room depends on the hash length",
			giveDeployment: strings.Repeat("c", 250),
			giveHash:       "xyz12",
			want:           strings.Repeat("c", 247) + "-xyz12",
		},
		{
			// No room at all for the name: nothing is cut (upstream does the same).
			name:           "overlong hash is not truncated",
			giveDeployment: strings.Repeat("d", 252),
			giveHash:       strings.Repeat("h", 252),
			want:           strings.Repeat("d", 252) + "-" + strings.Repeat("h", 252),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ReplicaSetName(tt.giveDeployment, tt.giveHash)
			if got != tt.want {
				t.Errorf("ReplicaSetName(%d chars, %q) = %q (%d chars), want %q (%d chars)",
					len(tt.giveDeployment), tt.giveHash, got, len(got), tt.want, len(tt.want))
			}
			if len(tt.giveHash) <= 10 && len(got) > validation.DNS1123SubdomainMaxLength {
				t.Errorf("len(ReplicaSetName()) = %d, want <= %d", len(got), validation.DNS1123SubdomainMaxLength)
			}
		})
	}
}
