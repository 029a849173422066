import fs from 'node:fs';
import path from 'node:path';
import type { Job, JobImage } from '../engine/job.js';
import {
  KIND_DELETE,
  KIND_JOB,
  SEGMENT_HEADER_BYTES,
  checkSegmentHeader,
  decodeRecord,
  jobRecordBytes,
  parseSegmentFileName,
  resync,
  scanRecord,
  type StateImage,
} from './format.js';
import { IdMark } from './id-mark.js';

/** Where replayed records go (the engine's restore methods). */
export interface RecoverySink {
  restoreJob(img: JobImage, file: number): void;
  restoreState(img: StateImage): void;
  restoreDelete(id: number): void;
}

/** A segment found on disk, after its damaged or unused tail was cut off. */
export interface SegmentOnDisk {
  index: number;
  path: string;
  bytes: number;
  /** Live jobs whose latest full record is in this segment (see countLive). */
  live: number;
}

export interface Recovery {
  segments: SegmentOnDisk[];
  /** Above every id seen in any record and the stored high-water mark. */
  nextId: number;
  records: number;
  /** One line per problem, each naming the file and the byte offset. */
  problems: string[];
}

/**
 * Replays every segment in DIR, oldest first. Damage never stops a start: a torn or corrupt
 * tail is cut off, a damaged record inside a segment is skipped up to the next intact one, and
 * each case is reported with its file and offset. `maxPayload` bounds a credible record.
 */
export function recover(dir: string, maxPayload: number, sink: RecoverySink): Recovery {
  const found: { index: number; path: string }[] = [];
  for (const name of fs.readdirSync(dir)) {
    const index = parseSegmentFileName(name);
    if (index !== null) found.push({ index, path: path.join(dir, name) });
  }
  found.sort((a, b) => a.index - b.index);

  const problems: string[] = [];
  const segments: SegmentOnDisk[] = [];
  let maxId = 0;
  let records = 0;

  for (const seg of found) {
    const data = fs.readFileSync(seg.path);
    const header = checkSegmentHeader(data);
    if (!header.ok) {
      if (data.length < SEGMENT_HEADER_BYTES || data.every((b) => b === 0)) {
        // A segment whose creation was cut short holds no records.
        problems.push(`${seg.path}:0: ${header.reason}; removed (it holds no records)`);
        fs.rmSync(seg.path, { force: true });
      } else {
        problems.push(`${seg.path}:0: ${header.reason}; the whole file is skipped and left in place`);
      }
      continue;
    }
    let at = SEGMENT_HEADER_BYTES;
    let end = data.length;
    while (at < data.length) {
      const scan = scanRecord(data, at, maxPayload, header.salt);
      if (scan.kind === 'end') {
        end = at;
        break;
      }
      if (scan.kind === 'short') {
        // A record that runs past the end is a torn tail, unless intact records follow it: then
        // its length field is damaged, and cutting here would throw those records away.
        const next = resync(data, at, maxPayload, header.salt);
        if (next >= 0) {
          problems.push(`${seg.path}:${at}: record runs past the end of the file; skipped ${next - at} bytes to the next intact record`);
          at = next;
          continue;
        }
        problems.push(`${seg.path}:${at}: torn record at the end (${data.length - at} bytes cut off)`);
        end = at;
        break;
      }
      if (scan.kind === 'bad') {
        const next = resync(data, at, maxPayload, header.salt);
        if (next < 0) {
          problems.push(`${seg.path}:${at}: ${scan.reason}; nothing intact follows (${data.length - at} bytes cut off)`);
          end = at;
          break;
        }
        problems.push(`${seg.path}:${at}: ${scan.reason}; skipped ${next - at} bytes to the next intact record`);
        at = next;
        continue;
      }
      const rec = decodeRecord(data, at, scan.size);
      if (typeof rec === 'string') {
        problems.push(`${seg.path}:${at}: ${rec}; record skipped`);
      } else {
        records++;
        if (rec.kind === KIND_JOB) {
          sink.restoreJob(rec.job, header.index);
          if (rec.job.id > maxId) maxId = rec.job.id;
        } else if (rec.kind === KIND_DELETE) {
          sink.restoreDelete(rec.id);
          if (rec.id > maxId) maxId = rec.id;
        } else {
          // A state record for a job with no full record seen is about a job whose full
          // record was compacted away after it died, or lost to damage: the sink ignores it.
          sink.restoreState(rec.state);
          if (rec.state.id > maxId) maxId = rec.state.id;
        }
      }
      at += scan.size;
    }
    if (end < data.length) {
      // Cut the preallocated zeros or the damaged tail, so appends never follow garbage.
      fs.truncateSync(seg.path, end);
    }
    segments.push({ index: header.index, path: seg.path, bytes: end, live: 0 });
  }

  return { segments, nextId: Math.max(maxId + 1, IdMark.read(dir), 1), records, problems };
}

/** Fills in each segment's live count from the restored jobs; returns the live record bytes. */
export function countLive(segments: SegmentOnDisk[], jobs: Iterable<Job>): number {
  const byIndex = new Map(segments.map((s) => [s.index, s]));
  let liveBytes = 0;
  for (const job of jobs) {
    const seg = byIndex.get(job.file);
    if (seg !== undefined) seg.live++;
    liveBytes += jobRecordBytes(job.tube.name.length, job.bodyLength);
  }
  return liveBytes;
}
