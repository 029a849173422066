/** The schedules page's data: every schedule with its next and last runs, read every couple of seconds. */

import type { ScheduleRequest } from '../../../shared/api.js';
import type { ScheduleDto } from '../../../shared/dto.js';
import { api, describeError, isAbort } from '../api.js';
import { notices } from './notices.svelte.js';

export class SchedulesView {
  list = $state.raw<ScheduleDto[] | null>(null);
  error = $state<string | null>(null);

  readonly load = async (signal?: AbortSignal): Promise<void> => {
    try {
      this.list = await api.schedules(signal);
      this.error = null;
    } catch (e) {
      if (!isAbort(e)) this.error = describeError(e);
    }
  };

  /** Creates (id null) or edits; answers the saved schedule, or throws the server's reason. */
  async save(id: number | null, request: ScheduleRequest): Promise<ScheduleDto> {
    const saved = id === null ? await api.createSchedule(request) : await api.editSchedule(id, request);
    await this.load();
    return saved;
  }

  async setPaused(schedule: ScheduleDto, paused: boolean): Promise<void> {
    await this.act(() => api.editSchedule(schedule.id, { paused }), `${schedule.name}: ${paused ? 'paused' : 'resumed'}`);
  }

  async runNow(schedule: ScheduleDto): Promise<void> {
    await this.act(async () => {
      const run = await api.runSchedule(schedule.id);
      if (run.jobId === null) throw new Error(`no job: ${run.error ?? 'unknown reason'}`);
    }, `${schedule.name}: job put`);
  }

  async remove(schedule: ScheduleDto): Promise<void> {
    await this.act(() => api.deleteSchedule(schedule.id), `${schedule.name}: deleted`);
  }

  private async act(step: () => Promise<unknown>, done: string): Promise<void> {
    await notices.after(step, done);
    await this.load();
  }
}
