// Server-Sent Events, parsed as the WHATWG HTML standard's "event stream interpretation" says
// (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation).
// EventSource cannot POST, so the chat reads fetch()'s body with readEventStream instead.

const LF = 10, CR = 13, BOM = 0xfeff;

export class SSEParser {
  // onEvent({ event, data, id }): event is 'message' unless the stream named it; id is the last
  // event ID so far ('' when none).
  constructor(onEvent) {
    this.onEvent = onEvent;
    this.lastEventId = '';
    this.retry = null; // the reconnection time (ms) the stream last asked for, or null
    this._lineEnd = /[\r\n]/g; // per parser: a shared lastIndex would break nested parsers
    this._reset();
  }

  _reset() {
    this._line = '';      // an incomplete line carried over from the previous chunk
    this._start = true;   // nothing seen yet: a BOM here is dropped
    this._skipLF = false; // the previous chunk ended in \r: a \n starting the next ends nothing
    this._data = '';
    this._event = '';
    this._id = this.lastEventId; // the last event ID buffer (it becomes lastEventId on dispatch)
  }

  push(chunk) {
    chunk = String(chunk);
    let i = 0;
    if (chunk.length === 0) return;
    if (this._start) {
      this._start = false;
      if (chunk.charCodeAt(0) === BOM) i = 1;
    }
    if (this._skipLF) {
      this._skipLF = false;
      if (chunk.charCodeAt(i) === LF) i++;
    }
    const re = this._lineEnd;
    re.lastIndex = i;
    for (let m; (m = re.exec(chunk)) !== null; ) {
      const j = m.index;
      let next = j + 1;
      if (chunk.charCodeAt(j) === CR) {
        if (j + 1 === chunk.length) this._skipLF = true; // CRLF may be split across chunks
        else if (chunk.charCodeAt(j + 1) === LF) next = j + 2;
      }
      const line = this._line + chunk.slice(i, j);
      this._line = '';
      i = next;
      this._processLine(line);
      re.lastIndex = i;
    }
    if (i < chunk.length) this._line += chunk.slice(i);
  }

  // The end of the stream: an event not yet ended by a blank line is discarded, as the standard
  // says. The parser is then ready for a new stream (a reconnection): the last event ID and
  // retry are kept.
  end() {
    this._reset();
  }

  _processLine(line) {
    if (line === '') return this._dispatch();
    const colon = line.indexOf(':');
    if (colon === 0) return; // a comment
    let field = line, value = '';
    if (colon > 0) {
      field = line.slice(0, colon);
      value = line.slice(line.charCodeAt(colon + 1) === 32 ? colon + 2 : colon + 1);
    }
    switch (field) {
      case 'event': this._event = value; break;
      case 'data': this._data += value + '\n'; break;
      case 'id': if (!value.includes('\0')) this._id = value; break;
      case 'retry': if (/^[0-9]+$/.test(value)) this.retry = parseInt(value, 10); break;
      default: break; // unknown fields are ignored
    }
  }

  _dispatch() {
    this.lastEventId = this._id;
    const data = this._data, event = this._event;
    this._data = '';
    this._event = '';
    if (data === '') return;
    this.onEvent({ event: event || 'message', data: data.slice(0, -1), id: this.lastEventId });
  }
}

// Reads an event stream from a ReadableStream<Uint8Array> (fetch's response.body), calling
// onEvent for each event. Resolves { aborted: false } at the end of the stream, or
// { aborted: true } as soon as signal aborts (the body is cancelled, no event is delivered after
// the abort, and it does not throw). An error thrown by onEvent, or by the stream, cancels the
// body and rejects.
export async function readEventStream(body, onEvent, { signal } = {}) {
  const reader = body.getReader();
  const cancel = (why) => { reader.cancel(why).catch(() => {}); };
  if (signal && signal.aborted) {
    cancel(signal.reason);
    return { aborted: true };
  }
  // ignoreBOM: keep a BOM in the text, so that the parser strips exactly one, as the standard's
  // "UTF-8 decode" does (TextDecoder would strip one and the parser another).
  const decoder = new TextDecoder('utf-8', { ignoreBOM: true });
  const parser = new SSEParser((ev) => { if (!(signal && signal.aborted)) onEvent(ev); });
  const ABORTED = {};
  let onAbort = null;
  // A read pending on a silent server must end at once when the user presses stop.
  const abortedP = signal
    ? new Promise((resolve) => { onAbort = () => resolve(ABORTED); signal.addEventListener('abort', onAbort, { once: true }); })
    : null;
  try {
    for (;;) {
      const r = await (abortedP ? Promise.race([reader.read(), abortedP]) : reader.read());
      if (r === ABORTED || (signal && signal.aborted)) {
        cancel(signal.reason);
        return { aborted: true };
      }
      if (r.done) break;
      parser.push(decoder.decode(r.value, { stream: true }));
      if (signal && signal.aborted) {
        cancel(signal.reason);
        return { aborted: true };
      }
    }
    parser.push(decoder.decode()); // an incomplete UTF-8 sequence at the very end becomes U+FFFD
    parser.end();
    return { aborted: false };
  } catch (e) {
    // fetch() given the same signal rejects the pending read with an AbortError: that is an abort.
    if (signal && signal.aborted) {
      cancel(signal.reason);
      return { aborted: true };
    }
    cancel(e);
    throw e;
  } finally {
    if (onAbort) signal.removeEventListener('abort', onAbort);
  }
}

// An onEvent for OpenAI-style streams: each event's data is one JSON chunk, and "[DONE]" ends
// the stream. onChunk(obj, { done: false, event }) for a chunk, onChunk(null, { done: true }) at
// [DONE]. Events whose data is empty or only whitespace are skipped (keep-alives).
export function openAIChunks(onChunk) {
  return (ev) => {
    const data = ev.data;
    if (data.trim() === '') return;
    if (data.trim() === '[DONE]') return onChunk(null, { done: true });
    let obj;
    try {
      obj = JSON.parse(data);
    } catch {
      const shown = data.length > 200 ? `${data.slice(0, 200)}…` : data;
      throw new Error(`the stream sent invalid JSON: ${JSON.stringify(shown)}`);
    }
    return onChunk(obj, { done: false, event: ev.event });
  };
}
