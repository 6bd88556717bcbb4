package auth

import "errors"

// Sentinel errors. Every authentication failure the broker reports to a client is the same
// "access refused" (no hint which part was wrong); these tell the log and the metrics why.
var (
	// ErrAccessRefused is returned by Authenticate when the credentials do not name a user
	// whose password (or certificate) they prove. Unwrap it to a Reason with ReasonOf.
	ErrAccessRefused = errors.New("auth: access refused")
	// ErrUserExists is returned by File.AddUser when the name is already taken.
	ErrUserExists = errors.New("auth: user already exists")
	// ErrNoSuchUser is returned by File.SetPassword and File.DeleteUser for an unknown name.
	ErrNoSuchUser = errors.New("auth: no such user")
	// ErrInvalidFile is returned by Parse and Load for a users file that does not validate
	// (wrapped with every problem found).
	ErrInvalidFile = errors.New("auth: invalid users file")
	// ErrWeakPassword is returned by HashPassword for an empty password or one over bcrypt's
	// 72-byte limit.
	ErrWeakPassword = errors.New("auth: password must be 1 to 72 bytes")
)

// Errors of Owners.Claim.
var (
	// ErrOwnedByOther: the durable subscription belongs to another user.
	ErrOwnedByOther = errors.New("auth: durable subscription belongs to another user")
	// ErrQuotaExceeded: the user owns its quota's maximum already.
	ErrQuotaExceeded = errors.New("auth: quota exceeded")
	// ErrCreateRefused: the resource does not exist and the user may not create it.
	ErrCreateRefused = errors.New("auth: create refused")
)
