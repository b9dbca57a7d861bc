// What the pump (pump.ts) is plugged into and what it reads: its ports (the two sockets, and the
// session's events), the frame scanners' action tables, built once, and the message sizes it
// accepts. Every type not named in a table passes by length, unread (STYLE, wire + engine 2).

import type net from 'node:net';
import { Msg } from '../wire/codes.js';
import { FrameAction, actionTable } from '../wire/frame.js';
import type { BackendReader } from './server.js';
import type { ClientReader } from './session-types.js';

/** The backend side as the pump sees it: a socket to write and pause, whose reads come to a reader. */
export interface BackendPort {
  readonly socket: net.Socket;
  setReader(reader: BackendReader | null): void;
}

/** The client side, the same way: its reads come to a reader (see ClientReader). */
export interface ClientPort {
  readonly socket: net.Socket;
  setReader(reader: ClientReader | null): void;
}

export interface PumpEvents {
  /** The client sent Terminate. */
  terminate(): void;
  /** The client's stream broke the protocol (bad length or message type). */
  violation(type: number, length: number): void;
  /** Answering a control call broke inside the engine (a bug): the session cannot go on. */
  failed(err: unknown): void;
}

/** What the client may send once its session is running; anything else is a protocol violation. */
const CLIENT_ACTIONS: Partial<Record<number, FrameAction>> = {
  [Msg.Query]: FrameAction.Note,
  [Msg.Sync]: FrameAction.Note,
  [Msg.FunctionCall]: FrameAction.Note,
  [Msg.Parse]: FrameAction.Note,
  [Msg.Bind]: FrameAction.Note,
  [Msg.Execute]: FrameAction.Note,
  [Msg.Describe]: FrameAction.Note,
  [Msg.Close]: FrameAction.Note,
  [Msg.Flush]: FrameAction.Note,
  [Msg.Terminate]: FrameAction.Whole,
  [Msg.CopyData]: FrameAction.Pass,
  [Msg.CopyDone]: FrameAction.Pass,
  [Msg.CopyFail]: FrameAction.Pass,
  // PostgreSQL answers a stray password message with its own error; let it.
  [Msg.Password]: FrameAction.Pass,
};

/** With control functions on, Query and Parse are read whole, behind a prefilter that allocates nothing. */
const CONTROL_CLIENT_ACTIONS: Partial<Record<number, FrameAction>> = {
  ...CLIENT_ACTIONS,
  [Msg.Query]: FrameAction.Whole,
  [Msg.Parse]: FrameAction.Whole,
};

const BACKEND_ACTIONS: Partial<Record<number, FrameAction>> = {
  [Msg.ReadyForQuery]: FrameAction.Whole,
  [Msg.CopyInResponse]: FrameAction.Note,
  [Msg.CopyBothResponse]: FrameAction.Note,
};

// The scanners' tables, built once; a scanner copies one only when it changes an action (control).
export const CLIENT_TABLE = actionTable(CLIENT_ACTIONS, FrameAction.Reject);
export const CONTROL_CLIENT_TABLE = actionTable(CONTROL_CLIENT_ACTIONS, FrameAction.Reject);
export const BACKEND_TABLE = actionTable(BACKEND_ACTIONS);

export const PARSE_COMPLETE = 0x31;
export const QUERY_CANCELED = '57014';
export const CLOSE_COMPLETE = 0x33;

/** Control counts completions so it can tell its own from the client's (see control.ts). */
export const CONTROL_BACKEND_TABLE = actionTable({ ...BACKEND_ACTIONS, [PARSE_COMPLETE]: FrameAction.Note, [CLOSE_COMPLETE]: FrameAction.Note });

/** PostgreSQL's own ceiling for a message (PQ_LARGE_MESSAGE_LIMIT). */
export const MAX_MESSAGE = 0x3fffffff;
export const MAX_WHOLE = 1 << 20;
