package k8s

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/dump"
)

// PodTemplateHash returns the pod-template-hash of a template, computed the way the upstream
// controller computes it (controller.ComputeHash): FNV-32a over the deep-printed template,
// followed by the collision count as 8 little-endian bytes when set, printed in decimal and
// mapped onto a safe alphabet. Because it is the same function, a ReplicaSet made by the
// built-in controller is recognised as the same revision and nothing is recreated.
func PodTemplateHash(template *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(*template))
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		h.Write(b)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// ReplicaSetName is "<deployment>-<hash>", with the Deployment name cut so the result stays a
// valid DNS subdomain (253 characters).
func ReplicaSetName(deployment, hash string) string {
	maxName := validation.DNS1123SubdomainMaxLength - 1 - len(hash)
	if len(deployment) > maxName && maxName > 0 {
		deployment = deployment[:maxName]
	}
	return deployment + "-" + hash
}
