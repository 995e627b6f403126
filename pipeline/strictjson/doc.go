// Package strictjson decodes one JSON document read from outside the process (a seed's
// manifest and index, a depot record, a policy) the one strict way: an object that names a
// key twice, a key the target does not know, or anything after the document is refused,
// and every error says where, as line and column. encoding/json alone keeps the last of
// two equal keys (where other readers keep the first, so two tools would see two different
// documents) and stops reading after the first value.
package strictjson
