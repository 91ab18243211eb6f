// Draws a specdeck page from its JSON data block. Text from the file only ever becomes
// textContent: no markup is parsed, no URL is built from it.
"use strict";
(() => {
  const data = JSON.parse(document.getElementById("data").textContent);
  const main = document.getElementById("main");

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function table(columns, rows, classes) {
    const wrap = el("div", "scroll");
    const t = el("table");
    const head = el("tr");
    columns.forEach((c) => head.append(el("th", "", c)));
    t.append(el("thead"));
    t.tHead.append(head);
    const body = el("tbody");
    for (const row of rows) {
      const tr = el("tr");
      row.forEach((cell, i) => tr.append(el("td", classes ? classes[i] : "", cell)));
      body.append(tr);
    }
    t.append(body);
    wrap.append(t);
    return wrap;
  }

  function section(s) {
    const box = el("section", s.type);
    box.append(el("h2", "", s.title));
    if (s.type === "table") box.append(table(s.columns, s.rows, s.classes));
    if (s.type === "lines") s.lines.forEach((line) => box.append(el("p", "", line)));
    if (s.type === "image" && s.src.startsWith("data:image/svg+xml;base64,")) {
      const img = el("img");
      img.alt = s.alt;
      img.src = s.src;
      box.append(img);
    }
    return box;
  }

  document.getElementById("title").textContent = data.title;
  const meta = document.getElementById("meta");
  data.meta.forEach((line) => meta.append(el("li", "", line)));
  main.replaceChildren();
  if (data.prompt !== undefined && data.prompt !== null) {
    const prompt = el("details", "prompt");
    prompt.append(el("summary", "", "prompt"), el("pre", "", data.prompt));
    main.append(prompt);
  }
  if (data.panes) race(data);
  data.sections.forEach((s) => main.append(section(s)));

  // The race: every pane from its own t = 0 on one clock, at the recorded relative speed.
  function race(data) {
    const kinds = data.kinds;
    const { duration, stretch, speeds } = data.race;
    const legend = el("div", "legend");
    legend.append(el("span", "", "tokens:"));
    data.legend.forEach(([k, label]) => legend.append(el("span", "token--" + kinds[k], label)));

    const controls = el("div", "controls");
    const play = el("button", "play", "▶ play");
    play.type = "button";
    const speed = el("select", "speed");
    speed.setAttribute("aria-label", "race speed");
    for (const s of speeds) {
      const option = el("option", "", s + "x");
      option.value = String(s);
      option.selected = s === 1;
      speed.append(option);
    }
    const rejected = el("label");
    const showRejected = el("input");
    showRejected.type = "checkbox";
    showRejected.checked = true;
    rejected.append(showRejected, " rejected drafts");
    const clock = el("span", "clock");
    clock.setAttribute("aria-live", "off");
    controls.append(play, speed, rejected, clock);

    const grid = el("div", "panes");
    const panes = data.panes.map((p, pi) => {
      const box = el("section", "pane");
      const status = el("p", "status", p.finish);
      const text = el("div", "text");
      text.setAttribute("role", "group");
      text.setAttribute("aria-label", p.title + ": click a token, or Enter on it, for its round");
      const spans = p.rounds.map(([, tokens], ri) => {
        const span = el("span", "round");
        span.dataset.pane = String(pi);
        span.dataset.round = String(ri);
        span.tabIndex = ri === 0 ? 0 : -1;
        tokens.forEach(([piece, k]) => span.append(el("span", "token--" + kinds[k], piece)));
        text.append(span);
        return span;
      });
      const tail = el("span", "token--target", p.tail);
      text.append(tail);
      box.append(el("h2", "", p.title), status, text, el("p", "summary", p.summary));
      grid.append(box);
      return { p, status, text, spans, tail, shown: spans.length };
    });

    const detail = el("section");
    detail.id = "detail";
    detail.hidden = true;
    detail.setAttribute("aria-live", "polite");
    main.append(legend, controls, grid, detail);

    let position = duration, playing = false, last = 0, selected = null;

    function show(at) {
      position = Math.min(Math.max(at, 0), duration);
      for (const pane of panes) {
        const times = pane.p.rounds;
        let count = pane.shown;
        while (count < times.length && times[count][0] <= position) count++;
        while (count > 0 && times[count - 1][0] > position) count--;
        const follow = pane.text.scrollTop + pane.text.clientHeight >= pane.text.scrollHeight - 4;
        for (let i = Math.min(count, pane.shown); i < Math.max(count, pane.shown); i++) {
          pane.spans[i].hidden = i >= count;
        }
        pane.shown = count;
        const ended = position >= pane.p.end;
        pane.tail.hidden = !ended;
        pane.status.textContent = ended ? pane.p.finish : "racing";
        if (follow) pane.text.scrollTop = pane.text.scrollHeight;
      }
      const slowed = stretch > 1 ? ` · shown ${stretch.toPrecision(3)}x slower than real time` : "";
      clock.textContent = `${position.toFixed(2)} s of ${duration.toFixed(2)} s${slowed}`;
    }

    function frame(now) {
      if (!playing) return;
      show(position + ((now - last) / 1000) * Number(speed.value) / stretch);
      last = now;
      if (position >= duration) stop();
      else requestAnimationFrame(frame);
    }

    function stop() {
      playing = false;
      play.textContent = "▶ play";
    }

    play.addEventListener("click", () => {
      if (playing) return stop();
      if (position >= duration) show(0);
      playing = true;
      play.textContent = "❚❚ pause";
      last = performance.now();
      requestAnimationFrame(frame);
    });
    showRejected.addEventListener("change", () =>
      document.body.classList.toggle("no-rejected", !showRejected.checked));

    function open(span) {
      const pane = panes[Number(span.dataset.pane)];
      const [verdict, rows, cost] = pane.p.rounds[Number(span.dataset.round)][2];
      if (selected) selected.classList.remove("selected");
      selected = span;
      span.classList.add("selected");
      const close = el("button", "close", "close");
      close.type = "button";
      close.addEventListener("click", () => {
        detail.hidden = true;
        span.classList.remove("selected");
        span.focus();
      });
      const heading = el("h2", "", verdict[0]);
      const lines = verdict.slice(1).map((line) => el("p", "verdict", line));
      const classes = data.columns.map((c) => "col-" + c);
      const t = table(data.headings, rows, classes);
      t.querySelectorAll("td.col-token").forEach((cell, i) => {
        const kind = rows[i][2] === "unchecked" ? "rejected" : rows[i][2];
        if (kinds.includes(kind)) cell.classList.add("token--" + kind);
      });
      detail.replaceChildren(heading, ...lines, t, el("p", "cost", cost), close);
      detail.hidden = false;
      detail.scrollIntoView({ block: "nearest" });
    }

    function move(span, step) {
      const spans = panes[Number(span.dataset.pane)].spans;
      let i = Number(span.dataset.round) + step;
      while (i >= 0 && i < spans.length && spans[i].hidden) i += step;
      if (i < 0 || i >= spans.length) return;
      span.tabIndex = -1;
      spans[i].tabIndex = 0;
      spans[i].focus();
    }

    grid.addEventListener("click", (event) => {
      const span = event.target.closest(".round");
      if (span) open(span);
    });
    grid.addEventListener("keydown", (event) => {
      const span = event.target.closest(".round");
      if (!span) return;
      const step = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 }[event.key];
      if (event.key === "Enter" || event.key === " ") open(span);
      else if (step) move(span, step);
      else return;
      event.preventDefault();
    });
    detail.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && selected) detail.querySelector(".close").click();
    });
    show(duration);
  }
})();
