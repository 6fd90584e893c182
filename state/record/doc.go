// Package record holds the records opsbot keeps (pins, decisions, the
// audit, stage requests, notices) and the interfaces through which the
// code that decides a delivery reads and changes them in one transaction.
// It imports no storage: state implements the interfaces on bbolt, and
// commands, notices and their tests link nothing of it.
package record
