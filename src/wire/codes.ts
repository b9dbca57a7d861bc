// Protocol constants for PostgreSQL's v3 wire protocol.

/** Message type bytes. Frontend (client -> server) and backend (server -> client) share some letters. */
export const enum Msg {
  // frontend
  Bind = 0x42, // B
  Close = 0x43, // C (frontend) / CommandComplete (backend)
  Describe = 0x44, // D (frontend) / DataRow (backend)
  Execute = 0x45, // E (frontend) / ErrorResponse (backend)
  FunctionCall = 0x46, // F
  Flush = 0x48, // H
  Parse = 0x50, // P
  Query = 0x51, // Q
  Sync = 0x53, // S (frontend) / ParameterStatus (backend)
  Terminate = 0x58, // X
  CopyData = 0x64, // d
  CopyDone = 0x63, // c
  CopyFail = 0x66, // f
  Password = 0x70, // p: PasswordMessage, SASLInitialResponse, SASLResponse
  // backend
  Authentication = 0x52, // R
  BackendKeyData = 0x4b, // K
  CommandComplete = 0x43, // C
  CopyInResponse = 0x47, // G
  DataRow = 0x44, // D
  FunctionCallResponse = 0x56, // V
  CopyBothResponse = 0x57, // W
  ErrorResponse = 0x45, // E
  NoticeResponse = 0x4e, // N
  NegotiateProtocolVersion = 0x76, // v
  ParameterStatus = 0x53, // S
  ReadyForQuery = 0x5a, // Z
}

/** The special request codes sent in place of a protocol version in a startup-shaped packet. */
export const SSL_REQUEST_CODE = 80877103;
export const GSSENC_REQUEST_CODE = 80877104;
export const CANCEL_REQUEST_CODE = 80877102;
export const PROTOCOL_3_0 = 196608; // 3 << 16

/** Authentication request subtypes (the Int32 after 'R'). */
export const enum Auth {
  Ok = 0,
  CleartextPassword = 3,
  SASL = 10,
  SASLContinue = 11,
  SASLFinal = 12,
}

/** PostgreSQL's own limit on a startup packet (MAX_STARTUP_PACKET_LENGTH). */
export const MAX_STARTUP_PACKET = 10000;

/** Transaction status byte carried by ReadyForQuery. */
export const enum TxStatus {
  Idle = 0x49, // I
  InBlock = 0x54, // T
  Failed = 0x45, // E
}

