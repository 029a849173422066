import fs from 'node:fs';
import path from 'node:path';
import type { Job, JobImage } from '../engine/records.js';
import {
  KIND_DELETE,
  KIND_JOB,
  KIND_STATE,
  SEGMENT_HEADER_BYTES,
  checkSegmentHeader,
  decodeRecord,
  jobRecordBytes,
  parseSegmentFileName,
  resync,
  scanRecord,
  type DecodedRecord,
  type StateImage,
  type TubeSettingsImage,
} from './format.js';
import { requireRegularFile, withFile } from './dir-error.js';
import { IdMark } from './id-mark.js';
import { findSalt, type SaltSource } from './salt-recovery.js';
import { jobFile } from '../engine/records.js';
import { bodyLengthOf } from '../engine/body-store.js';

/** Where replayed records go (the engine's restore methods). */
export interface RecoverySink {
  restoreJob(img: JobImage, file: number): void;
  restoreState(img: StateImage): void;
  restoreDelete(id: number): void;
  restoreTubeSettings(img: TubeSettingsImage): void;
}

/** A tube's settings and policy as the binlog last recorded them, in which segment, in how many bytes. */
export interface TubeFile {
  file: number;
  settings: TubeSettingsImage['settings'];
  policy: TubeSettingsImage['policy'];
  bytes: number;
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
  /** Each tube's settings and the segment holding their latest record (cleared ones are left out). */
  tubeFiles: Map<string, TubeFile>;
}

/**
 * Replays every segment in DIR, oldest first. Damage never stops a start: a torn or corrupt
 * tail is cut off, a damaged record inside a segment is skipped up to the next intact one, the
 * records of a segment whose header is damaged are read by their own checksums, and each case is
 * reported with its file and offset. `maxPayload` bounds a credible record. Throws a
 * BinlogDirError when a segment cannot be read at all (a directory under a segment's name, an
 * I/O or permission error): that is not damage to work around but a directory to fix.
 */
export function recover(dir: string, maxPayload: number, sink: RecoverySink): Recovery {
  const replay = new Replay(maxPayload, sink);
  const segments: SegmentOnDisk[] = [];
  for (const seg of segmentFiles(dir)) {
    const kept = replay.segment(seg.path, seg.index);
    if (kept !== null) segments.push(kept);
  }
  return {
    segments,
    nextId: Math.max(replay.maxId + 1, IdMark.read(dir), 1),
    records: replay.records,
    problems: replay.problems,
    tubeFiles: replay.tubeFiles,
  };
}

/** The segment files in DIR, oldest first. */
function segmentFiles(dir: string): { index: number; path: string }[] {
  const found: { index: number; path: string }[] = [];
  for (const name of withFile(dir, () => fs.readdirSync(dir))) {
    const index = parseSegmentFileName(name);
    if (index !== null) found.push({ index, path: path.join(dir, name) });
  }
  return found.sort((a, b) => a.index - b.index);
}

/** What replaying the records of one segment found. */
interface RecordsReplayed {
  /** Where the records end; the file is cut there. */
  end: number;
  records: number;
  /** JOB records among them (puts, compaction, edits). */
  jobs: number;
  /** Bytes of damage skipped or cut off (the preallocated zeros after them are not counted). */
  skipped: number;
}

/** One start's replay: the problems found and what the records said, segment after segment. */
class Replay {
  readonly problems: string[] = [];
  readonly tubeFiles = new Map<string, TubeFile>();
  maxId = 0;
  records = 0;

  constructor(
    private readonly maxPayload: number,
    private readonly sink: RecoverySink,
  ) {}

  /** Replays one segment file; returns it when it is kept as a segment, null when skipped or removed. */
  segment(file: string, nameIndex: number): SegmentOnDisk | null {
    requireRegularFile(file);
    const data = withFile(file, () => fs.readFileSync(file));
    const header = checkSegmentHeader(data);
    if (header.ok) return this.keep(file, data, header.index, this.replayRecords(file, data, header.salt, header.index).end);
    if (header.problem === 'short' || data.every((b) => b === 0)) {
      // A segment whose creation was cut short holds no records.
      const reason = header.problem === 'short' ? header.reason : 'nothing but zeros';
      this.problems.push(`${file}:0: ${reason}; removed (it holds no records)`);
      withFile(file, () => fs.rmSync(file, { force: true }));
      return null;
    }
    if (header.problem === 'foreign') {
      // A future format, or not ours: nothing here can be read, and nothing may be lost.
      this.problems.push(`${file}:0: ${header.reason}; the whole file is skipped and left in place`);
      return null;
    }
    return this.damagedHeader(file, nameIndex, data, header.reason);
  }

  /**
   * A header that fails its checksum: its records carry their own magic and checksum, so they
   * are read once the salt is known (see findSalt); the index comes from the file name, since the
   * damage may be in the header's index.
   */
  private damagedHeader(file: string, index: number, data: Buffer, reason: string): SegmentOnDisk | null {
    const found = findSalt(data, this.maxPayload);
    if (found === null) {
      this.problems.push(`${file}:0: ${reason}, and no record in it passes its own checksum; the whole file is skipped and left in place`);
      return null;
    }
    // The summary goes before the lines about damage further in the file.
    const at = this.problems.length;
    const r = this.replayRecords(file, data, found.salt, index);
    this.problems.splice(
      at,
      0,
      `${file}:0: header damaged (${reason}); its records were read by their own checksums (${SALT_SOURCES[found.source]}): ` +
        `${r.records} records (${r.jobs} jobs) recovered, ${SEGMENT_HEADER_BYTES + r.skipped} bytes skipped (the ${SEGMENT_HEADER_BYTES}-byte header included)`,
    );
    return this.keep(file, data, index, r.end);
  }

  private keep(file: string, data: Buffer, index: number, end: number): SegmentOnDisk {
    if (end < data.length) {
      // Cut the preallocated zeros or the damaged tail, so appends never follow garbage.
      withFile(file, () => fs.truncateSync(file, end));
    }
    return { index, path: file, bytes: end, live: 0 };
  }

  /** Replays the records after the header, skipping damage up to the next intact record. */
  private replayRecords(file: string, data: Buffer, salt: number, index: number): RecordsReplayed {
    const r: RecordsReplayed = { end: data.length, records: 0, jobs: 0, skipped: 0 };
    let at = SEGMENT_HEADER_BYTES;
    while (at < data.length) {
      const scan = scanRecord(data, at, this.maxPayload, salt);
      if (scan.kind === 'end') {
        r.end = at;
        break;
      }
      if (scan.kind !== 'record') {
        // A record that runs past the end is a torn tail, unless intact records follow it: then
        // its length field is damaged, and cutting there would throw those records away.
        const next = resync(data, at, this.maxPayload, salt);
        if (next < 0) {
          const why = scan.kind === 'short' ? 'torn record at the end' : `${scan.reason}; nothing intact follows`;
          this.problems.push(`${file}:${at}: ${why} (${data.length - at} bytes cut off)`);
          r.skipped += endOfData(data, at) - at;
          r.end = at;
          break;
        }
        const why = scan.kind === 'short' ? 'record runs past the end of the file' : scan.reason;
        this.problems.push(`${file}:${at}: ${why}; skipped ${next - at} bytes to the next intact record`);
        r.skipped += next - at;
        at = next;
        continue;
      }
      const rec = decodeRecord(data, at, scan.size);
      if (typeof rec === 'string') {
        this.problems.push(`${file}:${at}: ${rec}; record skipped`);
        r.skipped += scan.size;
      } else {
        r.records++;
        if (rec.kind === KIND_JOB) r.jobs++;
        this.apply(rec, index, scan.size);
      }
      at += scan.size;
    }
    return r;
  }

  private apply(rec: DecodedRecord, index: number, bytes: number): void {
    this.records++;
    if (rec.kind === KIND_JOB) {
      this.sink.restoreJob(rec.job, index);
      this.seeId(rec.job.id);
    } else if (rec.kind === KIND_DELETE) {
      this.sink.restoreDelete(rec.id);
      this.seeId(rec.id);
    } else if (rec.kind === KIND_STATE) {
      // A state record for a job with no full record seen is about a job whose full record was
      // compacted away after it died, or lost to damage: the sink ignores it.
      this.sink.restoreState(rec.state);
      this.seeId(rec.state.id);
    } else {
      this.sink.restoreTubeSettings(rec.tube);
      const { tube, settings, policy } = rec.tube;
      if (settings === null && policy === null) this.tubeFiles.delete(tube);
      else this.tubeFiles.set(tube, { file: index, settings, policy, bytes });
    }
  }

  private seeId(id: number): void {
    if (id > this.maxId) this.maxId = id;
  }
}

/** Where the non-zero bytes from `from` on end: the zeros after them are preallocated space, not damage. */
function endOfData(data: Buffer, from: number): number {
  let end = data.length;
  while (end > from && data[end - 1] === 0) end--;
  return end;
}

const SALT_SOURCES: Record<SaltSource, string> = {
  stored: 'the salt stored in the header, confirmed by a record',
  header: 'the salt recovered from a record, confirmed by the header checksum',
  records: 'the salt recovered from records, confirmed by two of them',
};

/**
 * Fills in each segment's live count from the restored jobs and the tubes' settings records;
 * returns the live record bytes.
 */
export function countLive(segments: SegmentOnDisk[], jobs: Iterable<Job>, tubeFiles: ReadonlyMap<string, TubeFile> = new Map()): number {
  const byIndex = new Map(segments.map((s) => [s.index, s]));
  let liveBytes = 0;
  for (const job of jobs) {
    const seg = byIndex.get(jobFile(job));
    if (seg !== undefined) seg.live++;
    liveBytes += jobRecordBytes(job.tube.name.length, bodyLengthOf(job));
  }
  for (const { file, bytes } of tubeFiles.values()) {
    const seg = byIndex.get(file);
    if (seg !== undefined) seg.live++;
    liveBytes += bytes;
  }
  return liveBytes;
}
