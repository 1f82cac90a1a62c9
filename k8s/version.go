package k8s

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
)

// The kinds an ObjectVersion names.
const (
	KindDeployment = "Deployment"
	KindReplicaSet = "ReplicaSet"
)

// DeploymentVersion is d at its resourceVersion.
func DeploymentVersion(d *appsv1.Deployment) ObjectVersion {
	return ObjectVersion{Kind: KindDeployment, Name: d.Name, ResourceVersion: d.ResourceVersion}
}

// ReplicaSetVersion is rs at its resourceVersion.
func ReplicaSetVersion(rs *appsv1.ReplicaSet) ObjectVersion {
	return ObjectVersion{Kind: KindReplicaSet, Name: rs.Name, ResourceVersion: rs.ResourceVersion}
}

// ReplicaSetGone says the ReplicaSet was deleted.
func ReplicaSetGone(name string) ObjectVersion {
	return ObjectVersion{Kind: KindReplicaSet, Name: name, Gone: true}
}

// SeenBy reports whether an object at resourceVersion have is at least v. resourceVersions
// are etcd revisions, compared as numbers; one that does not parse is never seen, so the
// caller reads live.
func (v ObjectVersion) SeenBy(have string) bool {
	if v.ResourceVersion == "" {
		return true
	}
	h, err1 := strconv.ParseUint(have, 10, 64)
	w, err2 := strconv.ParseUint(v.ResourceVersion, 10, 64)
	return err1 == nil && err2 == nil && h >= w
}

// Holds reports whether snapshot s holds every version in want, as the informer cache's
// CaughtUp does: the Deployment or ReplicaSet of that name at that resourceVersion or later, and
// no ReplicaSet that must be gone. An object the snapshot leaves out (a ReplicaSet that is
// neither owned nor matched) is not held.
func (s Snapshot) Holds(want []ObjectVersion) bool {
	for _, w := range want {
		rv, found := "", false
		switch w.Kind {
		case KindDeployment:
			if d := s.Deployment; d != nil && d.Name == w.Name {
				rv, found = d.ResourceVersion, true
			}
		case KindReplicaSet:
			for _, rs := range s.ReplicaSets {
				if rs.Name == w.Name {
					rv, found = rs.ResourceVersion, true
					break
				}
			}
		default:
			return false
		}
		switch {
		case !found && w.Gone:
			continue
		case !found, w.Gone, !w.SeenBy(rv):
			return false
		}
	}
	return true
}
