import { describe, expect, it } from 'vitest';
import type { JobEventDto } from '../../shared/history.js';
import { buryStory } from './bury-story.js';

const event = (kind: JobEventDto['kind'], connection = 0, peer = '', note = ''): JobEventDto => ({ at: 1000, kind, connection, peer, note, actor: null });
const time = (): string => '14:02:11';

describe('why a job is buried, in one sentence', () => {
  it('names the release that made the dead-letter rule fire, its connection and address', () => {
    const events = [event('put', 3, '10.0.0.5:5000'), event('reserve', 7, '10.0.0.9:41234'), event('release', 7, '10.0.0.9:41234'), event('dead-letter', 0, '', 'release')];
    expect(buryStory(events, 5, time)).toBe(
      'Buried at 14:02:11: released by connection 7 (10.0.0.9:41234), the dead-letter rule buried it after 5 releases and timeouts since it was put or last kicked.',
    );
  });

  it('names a timeout and the connection that held the job past its TTR', () => {
    const events = [event('reserve', 9, '10.0.0.2:1'), event('timeout', 9, '10.0.0.2:1'), event('dead-letter', 0, '', 'timeout')];
    expect(buryStory(events, 2, time)).toContain('held past its TTR by connection 9 (10.0.0.2:1)');
  });

  it('names the worker that buried it, and says nothing once it was kicked since', () => {
    expect(buryStory([event('reserve', 4), event('bury', 4, '127.0.0.1:9')], 0, time)).toBe('Buried at 14:02:11 by its worker, connection 4 (127.0.0.1:9).');
    expect(buryStory([event('bury', 4), event('kick')], 0, time)).toBeNull();
    expect(buryStory([], 0, time)).toBeNull();
  });
});
